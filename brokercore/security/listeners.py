"""Listeners and their security protocols, read with Kafka's keys.

`listeners=PLAINTEXT://:9092,SASL_SSL://:9094` names each listener; its security protocol
is what `listener.security.protocol.map` maps the name to (Kafka's default map names each
protocol after itself, and controller listeners default to PLAINTEXT). A setting for one
listener is `listener.name.<name in lower case>.<key>`, falling back to `<key>`, as in
Kafka's `ListenerName.configPrefix`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from brokercore.config import BrokerConfig, ConfigError, Listener, parse_listeners


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"


@dataclass(frozen=True)
class ListenerSpec:
    """One listener: where it binds and the security protocol it speaks."""

    name: str
    host: str
    port: int
    protocol: SecurityProtocol


def protocol_map(config: BrokerConfig) -> dict[str, SecurityProtocol]:
    raw = config.get("listener.security.protocol.map") or DEFAULT_PROTOCOL_MAP
    explicit = "listener.security.protocol.map" in config.explicit
    mapping: dict[str, SecurityProtocol] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.strip().partition(":")
        try:
            mapping[name.strip()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise ConfigError(
                f"Invalid value {raw} for configuration listener.security.protocol.map: "
                f"{protocol.strip()!r} is not a security protocol") from None
        if not sep:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
    if not explicit:  # Kafka (KRaft): controller listeners not in the default map are PLAINTEXT
        for name in controller_listener_names(config):
            mapping.setdefault(name, SecurityProtocol.PLAINTEXT)
    return mapping


def controller_listener_names(config: BrokerConfig) -> list[str]:
    raw = config.get("controller.listener.names") or ""
    return [name.strip() for name in raw.split(",") if name.strip()]


def listener_specs(config: BrokerConfig) -> list[ListenerSpec]:
    """Every listener of `listeners` with its protocol; ConfigError for an unmapped name."""
    mapping = protocol_map(config)
    specs = []
    for listener in config.listeners:
        protocol = mapping.get(listener.name)
        if protocol is None:
            raise ConfigError(
                f"No security protocol defined for listener {listener.name} "
                "(listener.security.protocol.map)")
        specs.append(ListenerSpec(listener.name, listener.host, listener.port, protocol))
    if len({spec.name for spec in specs}) != len(specs):
        raise ConfigError("listeners: each listener name must appear once")
    return specs


def client_listener_specs(config: BrokerConfig) -> list[ListenerSpec]:
    """The listeners that serve Kafka clients: every one that is not a controller's."""
    controllers = set(controller_listener_names(config))
    specs = [spec for spec in listener_specs(config) if spec.name not in controllers]
    if not specs:
        raise ConfigError("listeners names no listener for clients, only controller listeners")
    return specs


def advertised_listeners(config: BrokerConfig) -> dict[str, Listener]:
    """`advertised.listeners` by name (a port 0 there means: the bound port)."""
    raw = config.get("advertised.listeners")
    return {listener.name: listener for listener in parse_listeners(raw or "")}


def inter_broker_listener_name(config: BrokerConfig) -> str:
    """`inter.broker.listener.name`, else (Kafka's `security.inter.broker.protocol`
    default) the first client listener."""
    name = config.get("inter.broker.listener.name")
    specs = client_listener_specs(config)
    if name is None:
        wanted = config.get("security.inter.broker.protocol")
        if wanted is not None:
            for spec in specs:
                if spec.protocol.value == wanted:
                    return spec.name
            raise ConfigError(f"security.inter.broker.protocol {wanted}: no listener speaks it")
        return specs[0].name
    if name not in {spec.name for spec in specs}:
        raise ConfigError(f"inter.broker.listener.name {name} is not one of the listeners")
    return name


def listener_config(config: BrokerConfig, listener: str, key: str) -> str | None:
    """`listener.name.<listener>.<key>` if set, else `<key>`."""
    prefixed = config.get(f"listener.name.{listener.lower()}.{key}")
    return prefixed if prefixed is not None else config.get(key)
