"""Karapace's registry authfile, read as Karapace reads it, so its users can move over.

    {"users": [{"username": "admin", "algorithm": "sha512", "salt": "...",
                "password_hash": "..."}],
     "permissions": [{"username": "admin", "operation": "Write", "resource": ".*"},
                     {"username": "reader", "operation": "Read",
                      "resource": "Subject:general.*"},
                     {"username": "reader", "operation": "Read", "resource": "Config:"}]}

- `algorithm` sha1, sha256, sha512: PBKDF2-HMAC of the UTF-8 password with the salt's
  UTF-8 bytes, 5000 iterations, base64; scrypt: n=16384, r=8, p=1, base64. So an entry
  made by `karapace_mkpasswd` logs in here unchanged.
- A permission's `resource` is a regular expression matched at the start only (Python's
  `re.match`, as Karapace) against `Subject:<subject>` or `Config:` (the global config and
  mode). `Write` implies `Read`; there is no deny; a user without a matching entry is
  refused.
- The file is read again when its modification time changes (checked at most once a
  second); a file that no longer reads keeps the last good one, logged once per change.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)
RECHECK_S = 1.0
ALGORITHMS = ("sha1", "sha256", "sha512", "scrypt")


class AuthfileError(ValueError):
    pass


def hash_password(algorithm: str, salt: str, password: str) -> str:
    secret, salted = password.encode("utf-8"), salt.encode("utf-8")
    if algorithm == "scrypt":
        digest = hashlib.scrypt(secret, salt=salted, n=16384, r=8, p=1)
    elif algorithm in ALGORITHMS:
        digest = hashlib.pbkdf2_hmac(algorithm, secret, salted, 5000)
    else:
        raise AuthfileError(f"unknown algorithm {algorithm!r}")
    return base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True)
class User:
    username: str
    algorithm: str
    salt: str
    password_hash: str

    def check(self, password: str) -> bool:
        return hmac.compare_digest(self.password_hash.encode(),
                                   hash_password(self.algorithm, self.salt, password).encode())


@dataclass(frozen=True)
class Permission:
    username: str
    write: bool
    resource: re.Pattern[str]


@dataclass(frozen=True)
class Authfile:
    users: dict[str, User]
    permissions: tuple[Permission, ...]

    @classmethod
    def parse(cls, data: Any) -> Authfile:
        try:
            users = {}
            for entry in data["users"]:
                user = User(str(entry["username"]), str(entry["algorithm"]),
                            str(entry["salt"]), str(entry["password_hash"]))
                if user.algorithm not in ALGORITHMS:
                    raise AuthfileError(f"user {user.username!r}: unknown algorithm "
                                        f"{user.algorithm!r}")
                users[user.username] = user
            permissions = []
            for entry in data["permissions"]:
                operation = entry["operation"]
                if operation not in ("Read", "Write"):
                    raise AuthfileError(f"unknown operation {operation!r}")
                permissions.append(Permission(str(entry["username"]), operation == "Write",
                                              re.compile(entry["resource"])))
        except (KeyError, TypeError, re.error) as exc:
            raise AuthfileError(f"not a Karapace authfile: {exc!r}") from exc
        return cls(users, tuple(permissions))

    def authenticate(self, username: str, password: str) -> bool:
        user = self.users.get(username)
        return user is not None and user.check(password)

    def allows(self, username: str, write: bool, resources: list[str]) -> bool:
        """Whether the user may read (or write) at least one of these resources."""
        return any(permission.username == username and (permission.write or not write)
                   and any(permission.resource.match(resource) for resource in resources)
                   for permission in self.permissions)


class AuthfileWatch:
    """The authfile at a path, read again when it changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._mtime: float | None = None
        self._checked = 0.0
        self._current = self._read()  # a broken file at start is an error, not "open"

    def _read(self) -> Authfile:
        stat = os.stat(self.path)
        with open(self.path, encoding="utf-8") as file:
            try:
                authfile = Authfile.parse(json.load(file))
            except json.JSONDecodeError as exc:
                raise AuthfileError(f"{self.path}: not JSON: {exc}") from exc
        self._mtime = stat.st_mtime
        return authfile

    def current(self) -> Authfile:
        now = time.monotonic()
        if now - self._checked >= RECHECK_S:
            with self._lock:
                self._checked = now
                try:
                    mtime: float | None = os.stat(self.path).st_mtime
                except OSError:
                    mtime = None
                if mtime != self._mtime:
                    self._mtime = mtime  # tried once per change, logged once per change
                    try:
                        self._current = self._read()
                    except (OSError, AuthfileError) as exc:
                        log.warning("authfile %s not reloaded, keeping the last one: %s",
                                    self.path, exc)
        return self._current
