"""The worker's configuration, with Apache Kafka's keys (connect-distributed.properties), read
from a Java properties file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from connect.configdef import ConfigException


def read_properties(text: str) -> dict[str, str]:
    """Java .properties: `key=value` or `key: value`, `#`/`!` comments, `\\` continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if match:
            props[match.group(1)] = match.group(2)
        else:
            props[line] = ""
    return props


def _int(props: dict[str, str], key: str, default: int) -> int:
    try:
        return int(props.get(key, default))
    except ValueError:
        raise ConfigException(f"Invalid value {props[key]} for configuration {key}") from None


@dataclass(frozen=True)
class WorkerConfig:
    props: dict[str, str]
    bootstrap_servers: str
    group_id: str
    config_topic: str
    offset_topic: str
    status_topic: str
    config_replication: int
    offset_replication: int
    status_replication: int
    offset_partitions: int
    status_partitions: int
    rest_scheme: str  # "http" or "https" (listeners; rest_tls.py for https's settings)
    rest_host: str
    rest_port: int
    advertised_url: str
    exactly_once_source: bool
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    offset_flush_interval_ms: int
    plugin_path: tuple[str, ...]
    connect_protocol: str
    scheduled_rebalance_max_delay_ms: int

    @classmethod
    def from_file(cls, path: str | Path) -> WorkerConfig:
        return cls.from_props(read_properties(Path(path).read_text()))

    @classmethod
    def from_props(cls, props: dict[str, str]) -> WorkerConfig:
        for required in ("group.id", "config.storage.topic", "offset.storage.topic",
                         "status.storage.topic"):
            if not props.get(required):
                raise ConfigException(f'Missing required configuration "{required}" which '
                                      "has no default value.")
        scheme, host, port = _listener(props.get("listeners", "http://:8083"))
        advertised_host = props.get("rest.advertised.host.name") or host or "127.0.0.1"
        advertised_port = _int(props, "rest.advertised.port", port)
        advertised_scheme = (props.get("rest.advertised.listener") or scheme).lower()
        if advertised_scheme not in ("http", "https"):
            raise ConfigException(f"Invalid value {advertised_scheme} for configuration "
                                  "rest.advertised.listener: http or https")
        group_protocol = props.get("connect.protocol", "compatible").lower()
        if group_protocol not in ("eager", "compatible", "sessioned"):
            raise ConfigException(f"Invalid value {group_protocol} for configuration "
                                  "connect.protocol")
        eos = props.get("exactly.once.source.support", "disabled").lower()
        if eos not in ("disabled", "preparing", "enabled"):
            raise ConfigException(f"Invalid value {eos} for configuration "
                                  "exactly.once.source.support")
        return cls(
            props=props,
            bootstrap_servers=props.get("bootstrap.servers", "localhost:9092"),
            group_id=props["group.id"],
            config_topic=props["config.storage.topic"],
            offset_topic=props["offset.storage.topic"],
            status_topic=props["status.storage.topic"],
            config_replication=_int(props, "config.storage.replication.factor", 3),
            offset_replication=_int(props, "offset.storage.replication.factor", 3),
            status_replication=_int(props, "status.storage.replication.factor", 3),
            offset_partitions=_int(props, "offset.storage.partitions", 25),
            status_partitions=_int(props, "status.storage.partitions", 5),
            rest_scheme=scheme, rest_host=host, rest_port=port,
            advertised_url=f"{advertised_scheme}://{advertised_host}:{advertised_port}",
            exactly_once_source=eos == "enabled",
            session_timeout_ms=_int(props, "session.timeout.ms", 10_000),
            heartbeat_interval_ms=_int(props, "heartbeat.interval.ms", 3_000),
            rebalance_timeout_ms=_int(props, "rebalance.timeout.ms", 60_000),
            offset_flush_interval_ms=_int(props, "offset.flush.interval.ms", 60_000),
            connect_protocol="eager" if group_protocol == "eager" else "compatible",
            scheduled_rebalance_max_delay_ms=_int(props, "scheduled.rebalance.max.delay.ms",
                                                  300_000),
            plugin_path=tuple(p.strip() for p in props.get("plugin.path", "").split(",")
                              if p.strip()),
        )

    @property
    def worker_id(self) -> str:
        """Kafka's worker id: the advertised `host:port`, without the scheme."""
        return self.advertised_url.partition("://")[2]

    def worker_url(self, worker_id: str) -> str:
        """Another worker's REST API by its id: the group's workers share a scheme."""
        return f"{self.advertised_url.partition('://')[0]}://{worker_id}"

    def client_settings(self) -> dict[str, str]:
        """What the worker's own clients (and its group member) inherit: bootstrap and the
        security settings, in librdkafka's keys. Kafka's own keys, as connect-distributed
        .properties files write them, are translated: `sasl.jaas.config` (PLAIN or SCRAM
        login module) to `sasl.username`/`sasl.password`, a PEM `ssl.truststore.location`
        to `ssl.ca.location`; the JVM's other keystore keys are not librdkafka's."""
        keep = ("security.protocol", "sasl.", "ssl.")
        out = {k: v for k, v in self.props.items() if k.startswith(keep)}
        jaas = out.pop("sasl.jaas.config", "")
        if jaas:
            login = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', jaas))
            out.setdefault("sasl.username", login.get("username", ""))
            out.setdefault("sasl.password", login.get("password", ""))
        truststore = out.pop("ssl.truststore.location", "")
        if truststore and out.pop("ssl.truststore.type", "JKS").upper() == "PEM":
            out.setdefault("ssl.ca.location", truststore)
        for java_only in ("ssl.truststore.type", "ssl.truststore.password",
                          "ssl.keystore.type"):
            out.pop(java_only, None)
        out["bootstrap.servers"] = self.bootstrap_servers
        return out


def _listener(listeners: str) -> tuple[str, str, int]:
    """(scheme, host, port) of the first listener: the worker serves one."""
    first = listeners.split(",")[0].strip()
    match = re.fullmatch(r"(?:(https?)://)?([^:/]*):(\d+)/?", first, re.IGNORECASE)
    if not match:
        raise ConfigException(f"Invalid value {listeners} for configuration listeners: "
                              "http://host:port or https://host:port")
    return (match.group(1) or "http").lower(), match.group(2), int(match.group(3))
