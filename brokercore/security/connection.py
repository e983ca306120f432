"""What a listener's connections need to be secured, both ways.

`ListenerSecurity` is the server side of one listener: its TLS context and SASL settings,
built once at start (a bad key file or JAAS line stops the broker there, by name).
`ClientSecurity` is how this broker connects to another broker's listener of the same
name (`inter.broker.listener.name`): the listener's truststore and keystore, and the
mechanism `sasl.mechanism.inter.broker.protocol` with the username and password of the
listener's JAAS line for it. `secure_client` upgrades and authenticates an open
connection; the caller sends Kafka requests on it afterwards.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from brokercore.config import BrokerConfig, ConfigError

from .listeners import ListenerSpec, SecurityProtocol, listener_config
from .sasl import SaslSettings, jaas_config
from .scram import MECHANISMS, Lookup, ScramClient, ScramError
from .tls import client_context, server_context


@dataclass(frozen=True)
class ListenerSecurity:
    spec: ListenerSpec
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None

    @classmethod
    def build(cls, config: BrokerConfig, spec: ListenerSpec,
              scram_lookup: Lookup | None) -> ListenerSecurity:
        context = server_context(config, spec.name) if spec.protocol.tls else None
        sasl = (SaslSettings.from_config(config, spec.name, scram_lookup)
                if spec.protocol.sasl else None)
        return cls(spec, context, sasl)

    @classmethod
    def plaintext(cls, host: str, port: int, name: str = "PLAINTEXT") -> ListenerSecurity:
        return cls(ListenerSpec(name, host, port, SecurityProtocol.PLAINTEXT))


# (request key, version, body) -> response body: a Kafka request on the connection
SendRequest = Callable[[Any, int], Awaitable[Any]]


@dataclass(frozen=True)
class ClientSecurity:
    protocol: SecurityProtocol
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @classmethod
    def for_listener(cls, config: BrokerConfig, spec: ListenerSpec) -> ClientSecurity:
        context = client_context(config, spec.name) if spec.protocol.tls else None
        if not spec.protocol.sasl:
            return cls(spec.protocol, context)
        mechanism = (listener_config(config, spec.name, "sasl.mechanism.inter.broker.protocol")
                     or "GSSAPI")
        if mechanism not in ("PLAIN", *MECHANISMS.values()):
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mechanism} is not "
                              "supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        entry = jaas_config(config, spec.name, mechanism)
        if entry is None or "username" not in entry.options or "password" not in entry.options:
            raise ConfigError(
                f"listener {spec.name}: the {mechanism} JAAS line needs username and password "
                "for this broker's own connections (inter.broker.listener.name)")
        return cls(spec.protocol, context, mechanism, entry.options["username"],
                   entry.options["password"])


PLAINTEXT_CLIENT = ClientSecurity(SecurityProtocol.PLAINTEXT)


class AuthenticationFailed(Exception):
    """The peer refused our credentials, or answered the exchange with nonsense."""


async def open_secured(host: str, port: int, security: ClientSecurity, *,
                       limit: int = 2**16) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to host:port, TLS-wrapped if the listener speaks TLS (not yet SASL)."""
    if security.ssl_context is None:
        return await asyncio.open_connection(host, port, limit=limit)
    return await asyncio.open_connection(host, port, limit=limit, ssl=security.ssl_context,
                                         server_hostname=host)


async def authenticate(send: SendRequest, security: ClientSecurity) -> None:
    """SaslHandshake v1 and SaslAuthenticate v1 rounds on a fresh connection."""
    if security.mechanism is None:
        return
    handshake = await send(SaslHandshakeRequest(mechanism=security.mechanism), 1)
    if handshake.error_code != 0:
        raise AuthenticationFailed(f"SaslHandshake {security.mechanism}: error "
                                   f"{handshake.error_code} (enabled: {handshake.mechanisms})")

    async def round_trip(token: bytes) -> bytes:
        answer = await send(SaslAuthenticateRequest(auth_bytes=token), 1)
        if answer.error_code != 0:
            raise AuthenticationFailed(answer.error_message or f"error {answer.error_code}")
        return bytes(answer.auth_bytes)

    if security.mechanism == "PLAIN":
        await round_trip(f"\0{security.username}\0{security.password}".encode())
        return
    client = ScramClient(security.mechanism, security.username, security.password)
    try:
        server_first = await round_trip(client.first())
        client.verify(await round_trip(client.final(server_first)))
    except ScramError as exc:
        raise AuthenticationFailed(str(exc)) from None
