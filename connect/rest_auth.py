"""HTTP Basic on the worker's REST API, switched on the Kafka way: the worker key
`rest.extension.classes` naming Kafka's `BasicAuthSecurityRestExtension` (README.md,
"Securing the REST API").

Kafka's extension checks users against a JAAS login module (a properties file of
passwords). Ours checks them against the cluster's SCRAM users, the platform's one
identity store (as the registry and the REST proxy do, httpauth/README.md): a SASL login
as the caller to the cluster the worker runs on (`clusterclient.login.kafka_login`), with
the worker's own listener settings (`security.protocol`, `ssl.*`) and the mechanism of
`rest.basic.auth.sasl.mechanism`. Accepted logins are cached (`rest.basic.auth.cache.ms`),
so a request costs a SASL login only the first time in a while.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from clusterclient.login import LoginUnavailable, VerifiedCache, kafka_login
from connect.config import WorkerConfig
from connect.configdef import ConfigException
from connect.errors import ConnectRestError

BASIC_AUTH_EXTENSION = ("org.apache.kafka.connect.rest.basic.auth.extension."
                        "BasicAuthSecurityRestExtension")
KNOWN_EXTENSIONS = (BASIC_AUTH_EXTENSION, "BasicAuthSecurityRestExtension")
REFUSED = "User cannot access the resource."  # Kafka's JaasBasicAuthFilter's words


class Unauthorized(ConnectRestError):
    status = 401


class LoginsUnavailable(ConnectRestError):
    """The cluster did not say whether the password is right: 503, not 401."""
    status = 503


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str

    def header(self) -> str:
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return f"Basic {token}"


def parse_basic(header: str | None) -> Credentials:
    """The credentials of an Authorization header; Unauthorized for anything else: none,
    another scheme, a token that is not base64 of UTF-8 text, no colon."""
    if not header:
        raise Unauthorized(f"{REFUSED} Credentials are required (HTTP Basic).")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic" or not token.strip():
        raise Unauthorized(f"{REFUSED} Only HTTP Basic authentication is accepted.")
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise Unauthorized(f"{REFUSED} The Basic credentials are not base64 of UTF-8 "
                           "text.") from None
    username, colon, password = decoded.partition(":")
    if not colon or not username:
        raise Unauthorized(f"{REFUSED} The Basic credentials are not user:password.")
    return Credentials(username, password)


@dataclass(frozen=True)
class BasicAuthConfig:
    login: dict[str, Any]  # the cluster's SASL listener, without a user
    realm: str
    cache_s: float
    timeout_s: float

    @classmethod
    def from_worker(cls, config: WorkerConfig) -> BasicAuthConfig | None:
        """The extension's settings, or None when `rest.extension.classes` does not name
        it. A class we do not have stops the worker, as a missing class stops Kafka's."""
        named = [c.strip() for c in config.props.get("rest.extension.classes", "").split(",")
                 if c.strip()]
        unknown = [c for c in named if c not in KNOWN_EXTENSIONS]
        if unknown:
            raise ConfigException(f"Invalid value {', '.join(unknown)} for configuration "
                                  f"rest.extension.classes: only {BASIC_AUTH_EXTENSION} "
                                  "is available")
        if not named:
            return None
        settings = config.client_settings()
        protocol = settings.get("security.protocol", "PLAINTEXT").upper()
        if not protocol.startswith("SASL_"):
            raise ConfigException(
                "BasicAuthSecurityRestExtension checks users by a SASL login to the "
                f"worker's cluster: security.protocol must be SASL_PLAINTEXT or SASL_SSL, "
                f"not {protocol}")
        login = {k: v for k, v in settings.items() if not k.startswith("sasl.")}
        login["sasl.mechanisms"] = config.props.get("rest.basic.auth.sasl.mechanism",
                                                    "SCRAM-SHA-512")
        login["client.id"] = "connect-rest-basic-auth"
        return cls(login, config.props.get("rest.basic.auth.realm", "KafkaConnect"),
                   _seconds(config, "rest.basic.auth.cache.ms", 60_000),
                   _seconds(config, "rest.basic.auth.timeout.ms", 10_000))


def _seconds(config: WorkerConfig, key: str, default_ms: int) -> float:
    try:
        return int(config.props.get(key, default_ms)) / 1000
    except ValueError:
        raise ConfigException(f"Invalid value {config.props[key]} for configuration "
                              f"{key}") from None


class BasicAuth:
    """Checks a request's Authorization header: `cached()` without blocking, then
    `authenticate()` (a SASL login, blocking: on a thread, never on the event loop)."""

    def __init__(self, config: BasicAuthConfig) -> None:
        self.config = config
        self.verified = VerifiedCache()

    @property
    def challenge(self) -> str:
        return f'Basic realm="{self.config.realm}"'

    def cached(self, header: str | None) -> Credentials | None:
        credentials = parse_basic(header)
        if self.verified.hit(credentials.username, credentials.password):
            return credentials
        return None

    def authenticate(self, header: str | None) -> Credentials:
        credentials = parse_basic(header)
        if self.verified.hit(credentials.username, credentials.password):
            return credentials
        try:
            accepted = kafka_login(self.config.login, credentials.username,
                                   credentials.password, self.config.timeout_s)
        except LoginUnavailable as exc:
            raise LoginsUnavailable(f"Credentials could not be verified: the cluster did "
                                    f"not answer ({exc})") from None
        if not accepted:
            raise Unauthorized(f"{REFUSED} Unknown user or wrong password.")
        self.verified.add(credentials.username, credentials.password, self.config.cache_s)
        return credentials


def worker_credentials(config: WorkerConfig) -> Credentials | None:
    """What the worker sends on its own requests to other workers (task configs to the
    leader) when they ask for Basic auth: its own login to the cluster. Kafka exempts
    those requests and signs them with the session key (`sessioned`), which this worker
    does not have (README.md, "Not here")."""
    settings = config.client_settings()
    if not settings.get("sasl.username"):
        return None
    return Credentials(settings["sasl.username"], settings.get("sasl.password", ""))
