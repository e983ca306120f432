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
import functools
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from brokercore.config import BrokerConfig, ConfigError

from .listeners import (
    ListenerSpec,
    SecurityProtocol,
    controller_listener_names,
    inter_broker_listener_name,
    listener_specs,
)
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
    def for_listener(cls, config: BrokerConfig, spec: ListenerSpec,
                     mechanism_key: str = "sasl.mechanism.inter.broker.protocol"
                     ) -> ClientSecurity:
        """How to connect to `spec` as a broker: the mechanism is `mechanism_key`'s
        (`sasl.mechanism.controller.protocol` for the controller listener)."""
        context = client_context(config, spec.name) if spec.protocol.tls else None
        if not spec.protocol.sasl:
            return cls(spec.protocol, context)
        mechanism = config.get(mechanism_key) or "GSSAPI"
        if mechanism not in ("PLAIN", *MECHANISMS.values()):
            raise ConfigError(f"{mechanism_key} {mechanism} is not "
                              "supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        entry = jaas_config(config, spec.name, mechanism)
        if entry is None or "username" not in entry.options or "password" not in entry.options:
            raise ConfigError(
                f"listener {spec.name}: the {mechanism} JAAS line needs username and password "
                "for this broker's own connections (inter.broker.listener.name)")
        return cls(spec.protocol, context, mechanism, entry.options["username"],
                   entry.options["password"])


PLAINTEXT_CLIENT = ClientSecurity(SecurityProtocol.PLAINTEXT)


@functools.cache
def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to the others' `inter.broker.listener.name` (built once per
    config: the TLS context loads files)."""
    name = inter_broker_listener_name(config)
    spec = next(spec for spec in listener_specs(config) if spec.name == name)
    return ClientSecurity.for_listener(config, spec)


class AuthenticationFailed(Exception):
    """The peer refused our credentials, or answered the exchange with nonsense."""


async def open_secured(host: str, port: int, security: ClientSecurity, *,
                       limit: int = 2**16) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to host:port, TLS-wrapped if the listener speaks TLS (not yet SASL)."""
    if security.ssl_context is None:
        return await asyncio.open_connection(host, port, limit=limit)
    return await asyncio.open_connection(host, port, limit=limit, ssl=security.ssl_context,
                                         server_hostname=host)


# mechanism -> (error code, enabled mechanisms)
Handshake = Callable[[str], Awaitable[tuple[int, list[str]]]]
# token -> (error code, error message, token)
Exchange = Callable[[bytes], Awaitable[tuple[int, str | None, bytes]]]


async def authenticate(send: SendRequest, security: ClientSecurity) -> None:
    """SaslHandshake v1 and SaslAuthenticate v1 rounds on a fresh Kafka connection."""

    async def handshake(mechanism: str) -> tuple[int, list[str]]:
        answer = await send(SaslHandshakeRequest(mechanism=mechanism), 1)
        return answer.error_code, list(answer.mechanisms)

    async def exchange(token: bytes) -> tuple[int, str | None, bytes]:
        answer = await send(SaslAuthenticateRequest(auth_bytes=token), 1)
        return answer.error_code, answer.error_message, bytes(answer.auth_bytes)

    await authenticate_with(handshake, exchange, security)


async def authenticate_with(handshake: Handshake, exchange: Exchange,
                            security: ClientSecurity) -> None:
    """The client side of a SASL login over any transport; AuthenticationFailed if refused."""
    if security.mechanism is None:
        return
    code, mechanisms = await handshake(security.mechanism)
    if code != 0:
        raise AuthenticationFailed(f"SaslHandshake {security.mechanism}: error {code} "
                                   f"(enabled: {mechanisms})")

    async def round_trip(token: bytes) -> bytes:
        code, message, answer = await exchange(token)
        if code != 0:
            raise AuthenticationFailed(message or f"error {code}")
        return answer

    if security.mechanism == "PLAIN":
        await round_trip(f"\0{security.username}\0{security.password}".encode())
        return
    client = ScramClient(security.mechanism, security.username, security.password)
    try:
        server_first = await round_trip(client.first())
        client.verify(await round_trip(client.final(server_first)))
    except ScramError as exc:
        raise AuthenticationFailed(str(exc)) from None


def controller_security(config: BrokerConfig, scram_lookup: Lookup | None = None
                        ) -> tuple[ListenerSecurity, ClientSecurity]:
    """The controller listener's security, both ways (the first of
    `controller.listener.names`; PLAINTEXT when it is not among the listeners)."""
    names = controller_listener_names(config)
    specs = {spec.name: spec for spec in listener_specs(config)}
    spec = specs.get(names[0]) if names else None
    if spec is None:
        return ListenerSecurity.plaintext("", 0, names[0] if names else "CONTROLLER"), \
            PLAINTEXT_CLIENT
    return ListenerSecurity.build(config, spec, scram_lookup), ClientSecurity.for_listener(
        config, spec, "sasl.mechanism.controller.protocol")
