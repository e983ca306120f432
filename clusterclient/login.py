"""Is this the password of this SCRAM user? Asked of the cluster itself, by logging in.

The cluster's SCRAM credentials are the one identity store of the platform's HTTP APIs
(the registry and the REST proxy through httpauth, the Connect worker's REST API through
connect/rest_auth.py): the broker keeps only salted keys (StoredKey, ServerKey), from which
a password cannot be checked without running the SCRAM exchange. So a login is a
confluent-kafka AdminClient with the user's name and password asking for metadata: an
answer means the broker accepted the proof; librdkafka's `_AUTHENTICATION` error means it
refused it. Anything else before the deadline (no broker answering) is neither: the
caller answers 503, not 401.

`VerifiedCache` keeps accepted logins for a short while, so a request is not a SASL login
each time. Here, not in an HTTP package, because both the Django apps (httpauth) and the
Django-free Connect worker use them.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

POLL_S = 0.05
CACHE_MAX = 10_000
log = logging.getLogger(__name__)  # librdkafka's own lines (a refused login is one)


class LoginUnavailable(Exception):
    """The cluster did not answer either way before the deadline."""


def kafka_login(config: dict[str, Any], username: str, password: str,
                timeout_s: float) -> bool:
    """True when the cluster accepts the login, False when it refuses it. `config` is the
    client config of the cluster's SASL listener (bootstrap, security.protocol,
    sasl.mechanisms, ssl.*), without a user."""
    errors: list[KafkaError] = []
    client = AdminClient({
        **config,
        "sasl.username": username,
        "sasl.password": password,
        "error_cb": errors.append,
        "client.id": config.get("client.id", "millrace-http-auth"),
        "logger": log,
    })
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.list_topics(timeout=POLL_S)
        except KafkaException:
            pass
        else:
            return True
        client.poll(0)  # serves error_cb
        if any(error.code() == KafkaError._AUTHENTICATION for error in errors):
            return False
        if time.monotonic() >= deadline:
            raise LoginUnavailable(str(errors[-1]) if errors else "no broker answered")


class VerifiedCache:
    """Logins the cluster accepted, by user: a salted hash of the password and when it
    expires. A hit costs one HMAC-SHA-256; a miss (or another password) logs in again.
    Refusals are not kept, so a new password works at once; a removed user or a changed
    password stops working when the entry expires."""

    def __init__(self) -> None:
        self._key = os.urandom(32)  # per process: the hashes mean nothing elsewhere
        self._entries: dict[str, tuple[bytes, float]] = {}
        self._lock = threading.Lock()

    def _digest(self, username: str, password: str) -> bytes:
        return hmac.new(self._key, f"{username}\0{password}".encode(), hashlib.sha256).digest()

    def hit(self, username: str, password: str) -> bool:
        entry = self._entries.get(username)
        return (entry is not None and entry[1] > time.monotonic()
                and hmac.compare_digest(entry[0], self._digest(username, password)))

    def add(self, username: str, password: str, ttl: float) -> None:
        with self._lock:
            if len(self._entries) >= CACHE_MAX:
                now = time.monotonic()
                self._entries = {u: e for u, e in self._entries.items() if e[1] > now}
                if len(self._entries) >= CACHE_MAX:
                    self._entries.clear()
            self._entries[username] = (self._digest(username, password),
                                       time.monotonic() + ttl)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
