"""SASL on a listener: the JAAS lines, PLAIN, and each connection's authentication state.

`SaslSettings` is one listener's SASL configuration: its enabled mechanisms, PLAIN's users
(`user_<name>="<password>"` options of the listener's `plain.sasl.jaas.config`, or of
`sasl.jaas.config`), SCRAM's credential lookup (the metadata image) and
`connections.max.reauth.ms`.

`SaslAuthenticator` is one connection's state, advanced only by the SaslHandshake and
SaslAuthenticate handlers and by the server's raw-token path (handshake v0), in Kafka's
order (`SaslServerAuthenticator`):

    HANDSHAKE      ApiVersions or SaslHandshake; nothing else is served
    AUTHENTICATE   SaslAuthenticate (after handshake v1) carrying the mechanism's tokens
    RAW_TOKEN      bare length-prefixed tokens (after handshake v0, as aiokafka sends)
    COMPLETE       every API; a SaslHandshake v1 starts re-authentication (KIP-368)
    FAILED         the response is the last thing the connection carries

A failure answers SASL_AUTHENTICATION_FAILED (or the handshake's
UNSUPPORTED_SASL_MECHANISM, or ILLEGAL_SASL_STATE) and `closing` tells the server to close
the connection once that response is written.
"""

from __future__ import annotations

import enum
import hmac
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from brokercore.config import BrokerConfig, ConfigError
from brokercore.protocol.errors import ErrorCode

from .listeners import listener_config
from .scram import MECHANISMS, Lookup, ScramError, ScramServer

SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISMS.values())
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY, API_VERSIONS_KEY = 17, 36, 18


class SaslFailure(Exception):
    """Authentication failed; the message is what the client is told."""


# -- JAAS -------------------------------------------------------------------------------
_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s";]+)')


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    options: dict[str, str]


def parse_jaas(text: str) -> JaasEntry:
    """`<LoginModule class> required key="value" ...;` (Kafka's `sasl.jaas.config`)."""
    body = text.strip()
    if not body.endswith(";"):
        raise ConfigError(f"sasl.jaas.config must end with ';': {text!r}")
    head = body[:-1].split(None, 2)
    if len(head) < 2 or head[1] not in ("required", "requisite", "sufficient", "optional"):
        raise ConfigError(f"sasl.jaas.config: expected '<LoginModule> required ...': {text!r}")
    rest = head[2] if len(head) > 2 else ""
    options: dict[str, str] = {}
    pos = 0
    while rest[pos:].strip():
        match = _JAAS_OPTION.match(rest, pos)
        if match is None:
            raise ConfigError(f"sasl.jaas.config: cannot read the options at {rest[pos:]!r}")
        key, value = match.groups()
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[key] = value
        pos = match.end()
    return JaasEntry(head[0], options)


def jaas_config(config: BrokerConfig, listener: str, mechanism: str) -> JaasEntry | None:
    raw = listener_config(config, listener, f"{mechanism.lower()}.sasl.jaas.config")
    if raw is None:
        raw = listener_config(config, listener, "sasl.jaas.config")
    return parse_jaas(raw) if raw else None


# -- mechanisms -------------------------------------------------------------------------
class SaslServer(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str | None: ...

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    """SASL/PLAIN (RFC 4616): one token `authzid NUL user NUL password`."""

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got "
                              f"{len(parts)}")
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        expected = self._users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.username, self.complete = user, True
        return b""


@dataclass
class SaslSettings:
    """One listener's SASL configuration."""

    listener: str
    mechanisms: Sequence[str]
    plain_users: dict[str, str] = field(default_factory=dict)
    scram_lookup: Lookup | None = None
    reauth_ms: int = 0

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str,
                    scram_lookup: Lookup | None) -> SaslSettings:
        raw = listener_config(config, listener, "sasl.enabled.mechanisms") or ""
        mechanisms = [m.strip() for m in raw.split(",") if m.strip()]
        usable = [m for m in mechanisms if m in SUPPORTED_MECHANISMS]
        if not usable:
            raise ConfigError(
                f"listener {listener}: sasl.enabled.mechanisms is {raw!r}; this broker "
                f"supports {', '.join(SUPPORTED_MECHANISMS)}")
        plain: dict[str, str] = {}
        if "PLAIN" in usable:
            entry = jaas_config(config, listener, "PLAIN")
            if entry is not None:
                plain = {key[5:]: value for key, value in entry.options.items()
                         if key.startswith("user_")}
        reauth = listener_config(config, listener, "connections.max.reauth.ms") or "0"
        return cls(listener, usable, plain, scram_lookup, int(reauth))

    def server(self, mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return _ScramAdapter(ScramServer(mechanism, self.scram_lookup or (lambda u, m: None)))


class _ScramAdapter:
    """A `ScramServer` whose failures are `SaslFailure`s."""

    def __init__(self, server: ScramServer) -> None:
        self._server = server

    @property
    def complete(self) -> bool:
        return self._server.complete

    @property
    def username(self) -> str | None:
        return self._server.username

    def evaluate(self, token: bytes) -> bytes:
        try:
            return self._server.evaluate(token)
        except ScramError as exc:
            raise SaslFailure(str(exc)) from None


# -- one connection ---------------------------------------------------------------------
class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKEN = "raw token"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class HandshakeResult:
    error_code: ErrorCode
    mechanisms: list[str]


@dataclass(frozen=True)
class AuthenticateResult:
    error_code: ErrorCode
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


class SaslAuthenticator:
    """One connection's SASL state; see the module docstring for the states."""

    def __init__(self, settings: SaslSettings,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.state = SaslState.HANDSHAKE
        self.principal: str | None = None  # "User:<name>" once authenticated
        self.closing = False  # close the connection once the current response is written
        self.failure: str | None = None  # why, for the one log line
        self._server: SaslServer | None = None
        self._mechanism = ""
        self._reauthenticating = False
        self._expires_at: float | None = None
        self._monotonic = monotonic

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def permits(self, api_key: int) -> bool:
        """Whether the request may be served in this state (else: close, as Kafka does)."""
        if self.state is SaslState.HANDSHAKE:
            return api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY)
        if self.state is SaslState.AUTHENTICATE:
            return api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY)
        return self.state is SaslState.COMPLETE

    def session_expired(self) -> bool:
        return self._expires_at is not None and self._monotonic() >= self._expires_at

    def handshake(self, mechanism: str, version: int) -> HandshakeResult:
        enabled = list(self.settings.mechanisms)
        if self.state is SaslState.COMPLETE:
            if version < 1:  # Kafka's KafkaApis: answered, the connection stays
                return HandshakeResult(ErrorCode.ILLEGAL_SASL_STATE, enabled)
            self._reauthenticating = True  # KIP-368: the client starts re-authenticating
        elif self.state is not SaslState.HANDSHAKE:
            return HandshakeResult(self._fail("SaslHandshake received in state "
                                              f"{self.state.value}",
                                              ErrorCode.ILLEGAL_SASL_STATE), enabled)
        if mechanism not in enabled:
            return HandshakeResult(self._fail(f"Unsupported SASL mechanism {mechanism}",
                                              ErrorCode.UNSUPPORTED_SASL_MECHANISM), enabled)
        self._mechanism = mechanism
        self._server = self.settings.server(mechanism)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_TOKEN
        return HandshakeResult(ErrorCode.NONE, enabled)

    def authenticate(self, token: bytes) -> AuthenticateResult:
        """One SaslAuthenticate request's answer."""
        if self.state is SaslState.COMPLETE:  # Kafka's KafkaApis: answered, the connection stays
            return AuthenticateResult(
                ErrorCode.ILLEGAL_SASL_STATE,
                "SaslAuthenticate request received after successful authentication", b"", 0)
        if self.state is not SaslState.AUTHENTICATE or self._server is None:
            code = self._fail(f"SaslAuthenticate received in state {self.state.value}",
                              ErrorCode.ILLEGAL_SASL_STATE)
            return AuthenticateResult(code, self.failure, b"", 0)
        try:
            challenge = self._evaluate(token)
        except SaslFailure as exc:
            code = self._fail(str(exc), ErrorCode.SASL_AUTHENTICATION_FAILED)
            return AuthenticateResult(code, str(exc), b"", 0)
        lifetime = self._session_lifetime_ms() if self.authenticated else 0
        return AuthenticateResult(ErrorCode.NONE, None, challenge, lifetime)

    def raw_token(self, token: bytes) -> bytes:
        """A bare token after handshake v0; SaslFailure closes the connection unanswered."""
        try:
            return self._evaluate(token)
        except SaslFailure as exc:
            self._fail(str(exc), ErrorCode.SASL_AUTHENTICATION_FAILED)
            raise

    def _evaluate(self, token: bytes) -> bytes:
        assert self._server is not None
        challenge = self._server.evaluate(token)
        if self._server.complete:
            principal = f"User:{self._server.username}"
            if self._reauthenticating and principal != self.principal:
                raise SaslFailure("Cannot change principals during re-authentication from "
                                  f"{self.principal}: {principal}")
            self.principal = principal
            self.state = SaslState.COMPLETE
            self._reauthenticating = False
            self._server = None
            reauth = self.settings.reauth_ms
            self._expires_at = self._monotonic() + reauth / 1000 if reauth > 0 else None
        return challenge

    def _session_lifetime_ms(self) -> int:
        return max(self.settings.reauth_ms, 0)

    def _fail(self, reason: str, code: ErrorCode) -> ErrorCode:
        self.state = SaslState.FAILED
        self.closing = True
        self.failure = reason
        return code

    @property
    def mechanism(self) -> str:
        return self._mechanism
