"""What the three MirrorMaker connectors share: Kafka's keys naming the two clusters, their
clients' settings, the topic filter and the replication policy (Kafka's
MirrorConnectorConfig), and the probe that turns an unreachable cluster into a clear error.

A cluster's clients take `<source|target>.cluster.bootstrap.servers` and every other
`<source|target>.cluster.*` key (`security.protocol`, `sasl.*`, `ssl.*`) with the prefix
removed, as Kafka's do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable
from connect.api import ConnectException, SourceConnector
from connect.configdef import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    ConfigValue,
    Importance,
    Type,
    at_least,
    one_of,
)
from connect.connectors.mirror.formats import ReplicationPolicy, compile_list, policy

VERSION = "4.0.0"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
# MirrorMaker copies bytes as they are; a worker's JsonConverter would wrap them
BYTE_CONVERTERS = {"key.converter": BYTES, "value.converter": BYTES}
ADMIN_TIMEOUT_S = 60.0  # Kafka's admin.timeout.ms
_ALIAS = re.compile(r"[A-Za-z0-9._-]+")


def _alias(name: str, value: Any) -> None:
    if value is not None and not _ALIAS.fullmatch(str(value)):
        raise ConfigException(f"Invalid value {value} for configuration {name}: a cluster "
                              "alias is a legal topic name prefix ([A-Za-z0-9._-]+)")


def _regex_list(name: str, value: Any) -> None:
    for pattern in value or []:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigException(
                f"Invalid value {pattern} for configuration {name}: {exc}") from None


def base_config() -> ConfigDef:
    """The keys every MirrorMaker connector takes (Kafka's names and defaults)."""
    return (ConfigDef()
            .define("source.cluster.alias", Type.STRING, NO_DEFAULT, Importance.HIGH,
                    "Alias of source cluster", validator=_alias)
            .define("target.cluster.alias", Type.STRING, "target", Importance.HIGH,
                    "Alias of target cluster. Used in metrics reporting.", validator=_alias)
            .define("source.cluster.bootstrap.servers", Type.STRING, NO_DEFAULT,
                    Importance.HIGH, "The source cluster's bootstrap servers")
            .define("target.cluster.bootstrap.servers", Type.STRING, NO_DEFAULT,
                    Importance.HIGH, "The target cluster's bootstrap servers")
            .define("replication.policy.class", Type.CLASS, ReplicationPolicy.kafka_class,
                    Importance.LOW, "Class which defines the remote topic naming convention.",
                    validator=one_of(
                        ReplicationPolicy.kafka_class, "DefaultReplicationPolicy",
                        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
                        "IdentityReplicationPolicy"))
            .define("replication.policy.separator", Type.STRING, ".", Importance.LOW,
                    "Separator used in remote topic naming convention.")
            .define("admin.timeout.ms", Type.LONG, 60000, Importance.LOW,
                    "Timeout for administrative tasks, e.g. detecting new topics.",
                    validator=at_least(1))
            .define("offset-syncs.topic.location", Type.STRING, "source", Importance.LOW,
                    "The location (source/target) of the offset-syncs topic.",
                    validator=one_of("source", "target")))


def topic_filter_config(config: ConfigDef) -> ConfigDef:
    return (config
            .define("topics", Type.LIST, [".*"], Importance.HIGH,
                    "Topics to replicate. Supports comma-separated topic names and regexes.",
                    validator=_regex_list)
            .define("topics.exclude", Type.LIST, [r".*[\-\.]internal", r".*\.replica", "__.*"],
                    Importance.HIGH, "Topics to exclude from replication. Supports "
                    "comma-separated topic names and regexes.", validator=_regex_list))


def validate_aliases(results: dict[str, ConfigValue], props: Mapping[str, str]) -> None:
    """The two aliases must differ: a remote topic's prefix says where it came from."""
    source, target = props.get("source.cluster.alias"), props.get("target.cluster.alias",
                                                                   "target")
    if source is not None and source == target:
        results["target.cluster.alias"].errors.append(
            f"Invalid value {target} for configuration target.cluster.alias: the source and "
            "target clusters need different aliases")


class MirrorConnector(SourceConnector):
    """What the three MirrorMaker connectors share: Kafka's version, bytes in and out, and
    the aliases check on top of their own config's validation. Abstract: each names its
    `kafka_class`, `config()` and tasks."""

    default_converters = BYTE_CONVERTERS

    def version(self) -> str:
        return VERSION

    def validate(self, props: Mapping[str, str]) -> dict[str, ConfigValue]:
        results = super().validate(props)
        validate_aliases(results, props)
        return results


def client_settings(props: Mapping[str, str], side: str) -> dict[str, str]:
    prefix = f"{side}.cluster."
    return {k[len(prefix):]: v for k, v in props.items()
            if k.startswith(prefix) and k != prefix + "alias"}


@dataclass
class MirrorConfig:
    source_alias: str
    target_alias: str
    source: dict[str, str]  # the source cluster's client settings, bootstrap.servers first
    target: dict[str, str]
    policy: ReplicationPolicy
    offset_syncs_on_target: bool
    admin_timeout_s: float
    topics: re.Pattern[str] | None = None
    topics_exclude: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, definition: ConfigDef, props: Mapping[str, str]) -> MirrorConfig:
        values = definition.parse(props)
        if values["source.cluster.alias"] == values["target.cluster.alias"]:
            raise ConfigException("the source and target clusters need different aliases")
        parsed = cls(
            values["source.cluster.alias"], values["target.cluster.alias"],
            client_settings(props, "source"), client_settings(props, "target"),
            policy(values["replication.policy.class"], values["replication.policy.separator"]),
            values["offset-syncs.topic.location"] == "target",
            values["admin.timeout.ms"] / 1000)
        if "topics" in values:
            parsed.topics = compile_list(values["topics"])
            parsed.topics_exclude = compile_list(values["topics.exclude"])
        return parsed

    def client(self, side: str, timeout: float | None = None) -> ClusterClient:
        settings = self.source if side == "source" else self.target
        name = self.source_alias if side == "source" else self.target_alias
        return ClusterClient(settings["bootstrap.servers"],
                             {**settings, "client.id": f"mirrormaker-{name}"},
                             timeout=timeout or min(self.admin_timeout_s, 30.0))

    @property
    def offset_syncs_topic(self) -> str:
        """On the source cluster it is named for the target, on the target for the source."""
        return self.policy.offset_syncs_topic(
            self.source_alias if self.offset_syncs_on_target else self.target_alias)

    @property
    def offset_syncs_side(self) -> str:
        return "target" if self.offset_syncs_on_target else "source"

    def replicates(self, topic: str) -> bool:
        """Kafka's rule: topics the filter names, and every heartbeats topic; never an
        internal topic, and never one that came from the target (a cycle)."""
        assert self.topics is not None and self.topics_exclude is not None
        if self.policy.is_internal(topic) or self.policy.topic_source(topic) == self.target_alias:
            return False
        wanted = self.topics.fullmatch(topic) and not self.topics_exclude.fullmatch(topic)
        return bool(wanted) or self.policy.is_heartbeats(topic)

    def probe(self, client: ClusterClient, side: str) -> None:
        """Fails with the cluster's alias and bootstrap when it does not answer."""
        alias = self.source_alias if side == "source" else self.target_alias
        try:
            client.metadata(refresh=True)
        except (ClusterUnavailable, ClusterRequestError) as exc:
            raise ConnectException(
                f"{side} cluster {alias} ({client.bootstrap_servers}) is unreachable: "
                f"{exc}") from exc
