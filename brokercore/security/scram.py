"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and both sides of
the exchange.

A stored credential is what Kafka's `UserScramCredentialRecord` holds: salt, StoredKey,
ServerKey and iterations, never the password nor the salted password. The server side
(`ScramServer`) checks a client's proof against StoredKey and proves itself with ServerKey;
the client side (`ScramClient`) is for this broker's own connections to other brokers.
Channel binding is not offered (gs2 header `n,,`), as in Kafka.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS

# AlterUserScramCredentials' mechanism numbers (Kafka's ScramMechanism.type)
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS = {name: number for number, name in MECHANISMS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramError(Exception):
    """The exchange failed; the message is what the peer is told."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """What the broker stores for a salted password (AlterUserScramCredentials sends
    the salted password, never the password)."""
    hash_name = _HASHES[mechanism]
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(),
                           _hmac(hash_name, salted, b"Server Key"), iterations)


def new_credential(mechanism: str, password: str,
                   iterations: int = MIN_ITERATIONS) -> ScramCredential:
    salt = os.urandom(32)
    return credential_from_salted(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramError("Invalid SCRAM message: bad base64") from None


def _attributes(message: str) -> dict[str, str]:
    """`a=1,b=2` as a dict; ScramError for anything else."""
    fields: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"Invalid SCRAM message: {part!r} is not an attribute")
        fields.setdefault(key, value)
    return fields


def decode_username(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid SCRAM username: bad escape")
    return name.replace("=2C", ",").replace("=3D", "=")


def encode_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


Lookup = Callable[[str, str], ScramCredential | None]  # (user, mechanism) -> credential


class ScramServer:
    """The server side of one exchange: `evaluate` each client message in turn."""

    def __init__(self, mechanism: str, lookup: Lookup, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._server_nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self._hash = _HASHES[mechanism]
        self._lookup = lookup
        self._step = 0
        self.username: str | None = None
        self.complete = False
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM message: not UTF-8") from None
        self._step += 1
        if self._step == 1:
            return self._client_first(message).encode()
        if self._step == 2:
            return self._client_final(message).encode()
        raise ScramError("Unexpected SCRAM message after the exchange completed")

    def _client_first(self, message: str) -> str:
        cbind, _, rest = message.partition(",")
        authzid, _, bare = rest.partition(",")
        if cbind not in ("n", "y"):
            raise ScramError("Invalid SCRAM client first message: channel binding "
                             "is not supported")
        if authzid and not authzid.startswith("a="):
            raise ScramError("Invalid SCRAM client first message: bad authorization id")
        fields = _attributes(bare)
        if "n" not in fields or "r" not in fields or not fields["r"]:
            raise ScramError("Invalid SCRAM client first message: missing user or nonce")
        self.username = decode_username(fields["n"])
        if authzid and decode_username(authzid[2:]) != self.username:
            raise ScramError("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        self._credential = self._lookup(self.username, self.mechanism)
        # An unknown user still gets a server-first message, so it looks like a bad password.
        credential = self._credential or ScramCredential(
            hashlib.sha256(self.username.encode()).digest(), b"", b"", MIN_ITERATIONS)
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._nonce = fields["r"] + self._server_nonce
        self._server_first = (f"r={self._nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first

    def _client_final(self, message: str) -> str:
        without_proof, sep, proof_text = message.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message: no proof")
        fields = _attributes(without_proof)
        if fields.get("c") != _b64(self._gs2_header.encode()):
            raise ScramError("Invalid SCRAM client final message: channel binding mismatch")
        # Kafka checks that the nonce ends with the server's, not that it equals it:
        # librdkafka before 2.1 sends the client's nonce twice, and Kafka accepts that.
        if not fields.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid SCRAM client final message: nonce mismatch")
        proof = _unb64(proof_text)
        credential = self._credential
        auth_message = (f"{self._client_first_bare},{self._server_first},"
                        f"{without_proof}").encode()
        if credential is None or len(proof) != len(credential.stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   credential.stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        self.complete = True
        return "v=" + _b64(_hmac(self._hash, credential.server_key, auth_message))


class ScramClient:
    """The client side: `first()`, then `final(server_first)`, then `verify(server_final)`."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _HASHES[mechanism]
        self._password = password
        self._nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self._first_bare = f"n={encode_username(username)},r={self._nonce}"
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = _attributes(text)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self._nonce) or not iterations.isdigit():
            raise ScramError(f"Invalid SCRAM server first message: {text!r}")
        self._salted = salted_password(self.mechanism, self._password, _unb64(salt),
                                       int(iterations))
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self._hash, self._salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = _hmac(self._hash, stored_key, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode(errors="replace")
        server_key = _hmac(self._hash, self._salted, b"Server Key")
        expected = "v=" + _b64(_hmac(self._hash, server_key, self._auth_message))
        if not hmac.compare_digest(text.encode(), expected.encode()):
            raise ScramError(f"SCRAM server signature does not match: {text!r}")


def parse_add_scram(text: str) -> tuple[str, str, str, int]:
    """(mechanism, user, password, iterations) of `kafka-storage format --add-scram`'s
    argument: `SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]` (values
    may be double-quoted); ValueError naming what is wrong."""
    mechanism, sep, rest = text.strip().partition("=")
    if mechanism not in MECHANISM_IDS:
        raise ValueError(f"--add-scram: unknown mechanism {mechanism!r} "
                         f"(one of {', '.join(MECHANISM_IDS)})")
    if not sep or not rest.startswith("[") or not rest.endswith("]"):
        raise ValueError(f"--add-scram: expected {mechanism}=[name=...,password=...]")
    options: dict[str, str] = {}
    for item in rest[1:-1].split(","):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--add-scram: {item!r} is not key=value")
        options[key.strip()] = value.strip().removeprefix('"').removesuffix('"')
    if not options.get("name") or "password" not in options:
        raise ValueError("--add-scram: name and password are required")
    iterations = int(options.get("iterations", MIN_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"--add-scram: iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
    return mechanism, options["name"], options["password"], iterations
