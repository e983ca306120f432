"""Broker and topic configuration, with Kafka's key names and defaults.

A broker reads `server.properties` (Kafka's format) and `--override key=value` pairs.
Topic-level configs fall back to their broker synonym (`retention.ms` ← `log.retention.ms`
← `log.retention.minutes` ← `log.retention.hours`), then to Kafka's default, and
DescribeConfigs reports which of these a value came from.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

LONG_MAX = 9223372036854775807

# Kafka's `compression.type` values and the RecordBatch codec each stands for; `producer`
# keeps whatever codec the producer chose.
COMPRESSION_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSION_TYPES = ("producer", *COMPRESSION_CODECS)


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ config types."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ config sources."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: str | None
    doc: str
    # For topic configs, the broker keys it falls back to, most specific first; each may be
    # scaled (log.retention.hours → ms).
    synonyms: tuple[tuple[str, int], ...] = ()
    read_only: bool = False
    choices: tuple[str, ...] = ()
    minimum: int | None = None  # Kafka's atLeast(n) for a number
    # Kafka's defineInternal: DescribeConfigs lists it only where it is set.
    internal: bool = False


def _k(name: str, type_: ConfigType, default: str | None, doc: str, **kw: object) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, **kw)  # type: ignore[arg-type]


T = ConfigType
HOUR_MS, MINUTE_MS = 3_600_000, 60_000

BROKER_CONFIGS: dict[str, ConfigKey] = {
    c.name: c
    for c in [
        _k("node.id", T.INT, "1", "The node id of this broker.", read_only=True),
        _k("broker.id", T.INT, "-1", "Legacy name of node.id.", read_only=True),
        _k("process.roles", T.LIST, "broker,controller", "Roles of this process.", read_only=True),
        _k("cluster.id", T.STRING, None, "Cluster id; generated on first start.", read_only=True),
        _k("listeners", T.STRING, "PLAINTEXT://:9092", "Listener URIs.", read_only=True),
        _k("advertised.listeners", T.STRING, None, "Listeners given to clients.", read_only=True),
        _k("log.dirs", T.STRING, "/tmp/kafka-logs", "Directories for log data.", read_only=True),
        _k("log.dir", T.STRING, "/tmp/kafka-logs", "Log directory if log.dirs is unset.",
           read_only=True),
        _k("metadata.log.dir", T.STRING, None,
           "Directory of the metadata log; the first of log.dirs if unset.", read_only=True),
        _k("num.partitions", T.INT, "1", "Default partition count of new topics."),
        _k("default.replication.factor", T.INT, "1", "Default replication factor."),
        _k("auto.create.topics.enable", T.BOOLEAN, "true", "Create topics on metadata request."),
        _k("delete.topic.enable", T.BOOLEAN, "true", "Allow topic deletion."),
        _k("message.max.bytes", T.INT, "1048588", "Largest record batch size allowed."),
        _k("socket.request.max.bytes", T.INT, "104857600", "Largest request size allowed."),
        _k("max.request.partition.size.limit", T.INT, "2000",
           "The most partitions a DescribeTopicPartitions response describes."),
        _k("log.segment.bytes", T.INT, "1073741824", "Size of a single log segment."),
        _k("log.roll.ms", T.LONG, None, "Time before a new segment is rolled out (ms)."),
        _k("log.roll.hours", T.INT, "168", "Time before a new segment is rolled out (hours)."),
        _k("log.retention.ms", T.LONG, None, "Retention time (ms)."),
        _k("log.retention.minutes", T.INT, None, "Retention time (minutes)."),
        _k("log.retention.hours", T.INT, "168", "Retention time (hours)."),
        _k("log.retention.bytes", T.LONG, "-1", "Retention size per partition."),
        _k("log.retention.check.interval.ms", T.LONG, "300000", "Retention check period."),
        _k("log.cleanup.policy", T.LIST, "delete", "delete and/or compact.",
           choices=("delete", "compact")),
        _k("log.cleaner.enable", T.BOOLEAN, "true", "Run the log cleaner for compaction."),
        _k("log.cleaner.backoff.ms", T.LONG, "15000", "Cleaner sleep when nothing to clean."),
        _k("log.cleaner.delete.retention.ms", T.LONG, "86400000", "Tombstone retention."),
        _k("log.cleaner.min.compaction.lag.ms", T.LONG, "0", "Minimum age before compaction."),
        _k("log.cleaner.min.cleanable.ratio", T.DOUBLE, "0.5", "Dirty ratio to clean."),
        _k("log.segment.delete.delay.ms", T.LONG, "60000", "Delay before deleting a file."),
        _k("log.index.interval.bytes", T.INT, "4096", "Bytes between offset index entries."),
        _k("log.index.size.max.bytes", T.INT, "10485760", "Maximum offset index size."),
        _k("log.flush.interval.messages", T.LONG, str(LONG_MAX), "Messages before fsync."),
        _k("log.flush.interval.ms", T.LONG, None, "Time before fsync (ms)."),
        _k("log.flush.scheduler.interval.ms", T.LONG, str(LONG_MAX), "Flusher period."),
        _k("log.dir.failure.timeout.ms", T.LONG, "30000",
           "Time a failed log dir may go unacknowledged by the controller before the "
           "broker shuts down (KIP-858).", read_only=True),
        _k("log.flush.offset.checkpoint.interval.ms", T.INT, "60000",
           "Period of each log dir's recovery-point-offset-checkpoint.", read_only=True),
        _k("log.flush.start.offset.checkpoint.interval.ms", T.INT, "60000",
           "Period of each log dir's log-start-offset-checkpoint.", read_only=True),
        _k("log.message.timestamp.type", T.STRING, "CreateTime", "CreateTime or LogAppendTime.",
           choices=("CreateTime", "LogAppendTime")),
        _k("compression.type", T.STRING, "producer",
           "Codec of stored batches; producer keeps the producer's.",
           choices=COMPRESSION_TYPES),
        _k("min.insync.replicas", T.INT, "1", "Minimum ISR size for acks=all."),
        _k("unclean.leader.election.enable", T.BOOLEAN, "false", "Elect out-of-sync leaders."),
        _k("auto.leader.rebalance.enable", T.BOOLEAN, "true", "Move leaders back to preferred."),
        _k("leader.imbalance.check.interval.seconds", T.LONG, "300", "Rebalance period."),
        _k("replica.lag.time.max.ms", T.LONG, "30000", "Time before a follower leaves ISR."),
        _k("broker.session.timeout.ms", T.INT, "9000", "Broker session with the controller."),
        _k("broker.heartbeat.interval.ms", T.INT, "2000", "Broker heartbeat period."),
        _k("initial.broker.registration.timeout.ms", T.INT, "60000",
           "Time a starting broker keeps trying to register before it exits."),
        _k("leader.imbalance.per.broker.percentage", T.INT, "10",
           "Share of non-preferred leaders per broker that triggers a rebalance."),
        _k("controlled.shutdown.enable", T.BOOLEAN, "true",
           "Move leadership away before a clean shutdown."),
        _k("controller.quorum.voters", T.LIST, None,
           "Quorum voters as id@host:port,...; unset: this node alone.", read_only=True),
        _k("controller.listener.names", T.LIST, "CONTROLLER",
           "Listeners that carry the controller quorum, not clients.", read_only=True),
        _k("controller.quorum.election.timeout.ms", T.INT, "1000",
           "Time without a quorum leader before an election."),
        _k("controller.quorum.request.timeout.ms", T.INT, "2000",
           "Time a broker waits for the active controller's answer."),
        _k("metadata.log.max.record.bytes.between.snapshots", T.LONG, "20971520",
           "Metadata log bytes after which a node snapshots its image.", read_only=True),
        _k("metadata.log.max.snapshot.interval.ms", T.LONG, "3600000",
           "Longest time before new metadata records go into a snapshot.", read_only=True),
        _k("replica.fetch.max.bytes", T.INT, "1048576", "Bytes a follower asks per partition."),
        _k("replica.fetch.response.max.bytes", T.INT, "10485760",
           "Bytes a follower asks per fetch."),
        _k("replica.fetch.wait.max.ms", T.INT, "500", "Follower fetch long-poll time."),
        _k("replica.fetch.min.bytes", T.INT, "1", "Follower fetch minimum bytes."),
        _k("replica.fetch.backoff.ms", T.INT, "1000", "Follower back-off after an error."),
        _k("replica.socket.timeout.ms", T.INT, "30000", "Follower socket timeout."),
        _k("max.incremental.fetch.session.cache.slots", T.INT, "1000",
           "Fetch sessions (KIP-227) this broker keeps at most.", read_only=True),
        _k("replica.high.watermark.checkpoint.interval.ms", T.LONG, "5000",
           "High watermark checkpoint period."),
        _k("metrics.http.listener", T.STRING, None,
           "host:port of the Prometheus /metrics endpoint; unset: none.", read_only=True),
        _k("offsets.topic.num.partitions", T.INT, "50", "Partitions of __consumer_offsets."),
        _k("offsets.topic.replication.factor", T.SHORT, "3", "RF of __consumer_offsets."),
        _k("offsets.topic.segment.bytes", T.INT, "104857600", "Segment size of offsets topic."),
        _k("offsets.retention.minutes", T.INT, "10080", "Retention of committed offsets."),
        _k("offsets.retention.check.interval.ms", T.LONG, "600000", "Offset expiry period."),
        _k("offsets.commit.timeout.ms", T.INT, "5000",
           "How long an offset commit waits for every in-sync replica of its partition."),
        _k("offset.metadata.max.bytes", T.INT, "4096", "Largest metadata of a committed offset."),
        _k("transaction.state.log.num.partitions", T.INT, "50",
           "Partitions of __transaction_state."),
        _k("transaction.state.log.replication.factor", T.SHORT, "3",
           "RF of __transaction_state."),
        _k("transaction.state.log.min.isr", T.INT, "2",
           "min.insync.replicas of __transaction_state (at most its replication factor)."),
        _k("transaction.state.log.segment.bytes", T.INT, "104857600",
           "Segment size of __transaction_state."),
        _k("transaction.max.timeout.ms", T.INT, "900000",
           "Largest transaction.timeout.ms a producer may ask for."),
        _k("transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, "10000",
           "How often the transaction coordinator aborts transactions past their timeout."),
        _k("transactional.id.expiration.ms", T.INT, "604800000",
           "How long the transaction coordinator keeps a transactional id whose "
           "transaction has ended (or never began) without a state change; then it "
           "writes a tombstone for it. An ongoing transaction's id never expires.",
           minimum=1),
        _k("transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, "3600000",
           "How often the transaction coordinator removes transactional ids past "
           "transactional.id.expiration.ms.", minimum=1),
        _k("producer.id.expiration.ms", T.INT, "86400000",
           "How long a partition keeps a producer id's state after the producer's last "
           "write (its batch's max timestamp); a producer with an open transaction is "
           "kept. Its state also goes sooner once retention deletes its last write.",
           minimum=1),
        _k("producer.id.expiration.check.interval.ms", T.INT, "600000",
           "How often each partition removes producer ids past producer.id.expiration.ms.",
           minimum=1, internal=True),
        _k("transaction.partition.verification.enable", T.BOOLEAN, "true",
           "Before a producer's first transactional write to a partition, ask the "
           "transaction coordinator whether its transaction includes the partition "
           "(KIP-890)."),
        _k("request.timeout.ms", T.INT, "30000",
           "How long a broker waits for another broker's answer to a transaction "
           "verification.", read_only=True),
        _k("group.initial.rebalance.delay.ms", T.INT, "3000", "Wait for more first joiners."),
        _k("group.min.session.timeout.ms", T.INT, "6000", "Smallest session timeout."),
        _k("group.max.session.timeout.ms", T.INT, "1800000", "Largest session timeout."),
        _k("group.max.size", T.INT, "2147483647", "Largest consumer group."),
        _k("group.consumer.session.timeout.ms", T.INT, "45000",
           "KIP-848 groups: a member silent this long is removed."),
        _k("group.consumer.min.session.timeout.ms", T.INT, "45000",
           "KIP-848 groups: smallest session timeout."),
        _k("group.consumer.max.session.timeout.ms", T.INT, "60000",
           "KIP-848 groups: largest session timeout."),
        _k("group.consumer.heartbeat.interval.ms", T.INT, "5000",
           "KIP-848 groups: the heartbeat interval given to members."),
        _k("group.consumer.min.heartbeat.interval.ms", T.INT, "5000",
           "KIP-848 groups: smallest heartbeat interval."),
        _k("group.consumer.max.heartbeat.interval.ms", T.INT, "15000",
           "KIP-848 groups: largest heartbeat interval."),
        _k("group.consumer.assignors", T.LIST, "uniform,range",
           "KIP-848 groups: the server-side assignors; the first is the default."),
        _k("group.consumer.max.size", T.INT, "2147483647", "KIP-848 groups: most members."),
        _k("group.consumer.migration.policy", T.STRING, "bidirectional",
           "Online migration of groups with members between the classic and the consumer "
           "protocol: bidirectional, upgrade, downgrade or disabled (case-insensitive)."),
        # Authorization (brokercore/security/authorizer.py)
        _k("authorizer.class.name", T.STRING, "",
           "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (or "
           "StandardAuthorizer) for ACLs; empty: none, everything is allowed.", read_only=True),
        _k("super.users", T.STRING, "",
           "Principals allowed everything, separated by semicolons (User:admin;User:broker).",
           read_only=True),
        _k("allow.everyone.if.no.acl.found", T.BOOLEAN, "false",
           "Allow everyone on a resource that has no ACL at all.", read_only=True),
        # Security (brokercore/security/); each may also be set per listener as
        # listener.name.<listener>.<key>.
        _k("listener.security.protocol.map", T.STRING,
           "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
           "Listener name to security protocol.", read_only=True),
        _k("inter.broker.listener.name", T.STRING, None,
           "The listener brokers use among themselves; unset: the first client listener.",
           read_only=True),
        _k("sasl.enabled.mechanisms", T.LIST, "GSSAPI",
           "SASL mechanisms a SASL listener offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
           "are served).", read_only=True),
        _k("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI",
           "The SASL mechanism of this broker's own connections to the others.",
           read_only=True),
        _k("sasl.mechanism.controller.protocol", T.STRING, "GSSAPI",
           "The SASL mechanism of connections to the controller listener.", read_only=True),
        _k("sasl.jaas.config", T.PASSWORD, None,
           "JAAS login module and options (PLAIN users as user_<name>).", read_only=True),
        _k("connections.max.reauth.ms", T.LONG, "0",
           "SASL session lifetime before re-authentication; 0: none.", read_only=True),
        _k("ssl.client.auth", T.STRING, "none", "none, requested or required.",
           read_only=True, choices=("none", "requested", "required")),
        _k("ssl.enabled.protocols", T.LIST, "TLSv1.2,TLSv1.3", "TLS versions served.",
           read_only=True),
        _k("ssl.keystore.type", T.STRING, "JKS", "PEM or PKCS12 (JKS is not read).",
           read_only=True),
        _k("ssl.keystore.location", T.STRING, None, "The keystore file.", read_only=True),
        _k("ssl.keystore.password", T.PASSWORD, None, "The keystore's password.",
           read_only=True),
        _k("ssl.key.password", T.PASSWORD, None, "The private key's password.",
           read_only=True),
        _k("ssl.keystore.certificate.chain", T.PASSWORD, None,
           "The certificate chain, inline PEM.", read_only=True),
        _k("ssl.keystore.key", T.PASSWORD, None, "The private key, inline PEM.",
           read_only=True),
        _k("ssl.truststore.type", T.STRING, "JKS", "PEM (JKS is not read).", read_only=True),
        _k("ssl.truststore.location", T.STRING, None, "The truststore file.", read_only=True),
        _k("ssl.truststore.certificates", T.PASSWORD, None,
           "Trusted certificates, inline PEM.", read_only=True),
        _k("ssl.endpoint.identification.algorithm", T.STRING, "https",
           "Host name checking of peers this broker connects to; empty: none.",
           read_only=True),
    ]
}

TOPIC_CONFIGS: dict[str, ConfigKey] = {
    c.name: c
    for c in [
        _k("cleanup.policy", T.LIST, "delete", "delete and/or compact.",
           synonyms=(("log.cleanup.policy", 1),), choices=("delete", "compact")),
        _k("compression.type", T.STRING, "producer",
           "Codec of the topic's stored batches; producer keeps the producer's.",
           synonyms=(("compression.type", 1),), choices=COMPRESSION_TYPES),
        _k("delete.retention.ms", T.LONG, "86400000", "Tombstone retention.",
           synonyms=(("log.cleaner.delete.retention.ms", 1),)),
        _k("file.delete.delay.ms", T.LONG, "60000", "Delay before deleting a file.",
           synonyms=(("log.segment.delete.delay.ms", 1),)),
        _k("flush.messages", T.LONG, str(LONG_MAX), "Messages before fsync.",
           synonyms=(("log.flush.interval.messages", 1),)),
        _k("flush.ms", T.LONG, str(LONG_MAX), "Time before fsync.",
           synonyms=(("log.flush.interval.ms", 1),)),
        _k("index.interval.bytes", T.INT, "4096", "Bytes between index entries.",
           synonyms=(("log.index.interval.bytes", 1),)),
        _k("max.message.bytes", T.INT, "1048588", "Largest record batch size allowed.",
           synonyms=(("message.max.bytes", 1),)),
        _k("message.timestamp.type", T.STRING, "CreateTime", "CreateTime or LogAppendTime.",
           synonyms=(("log.message.timestamp.type", 1),),
           choices=("CreateTime", "LogAppendTime")),
        _k("min.cleanable.dirty.ratio", T.DOUBLE, "0.5", "Dirty ratio to clean.",
           synonyms=(("log.cleaner.min.cleanable.ratio", 1),)),
        _k("min.compaction.lag.ms", T.LONG, "0", "Minimum age before compaction.",
           synonyms=(("log.cleaner.min.compaction.lag.ms", 1),)),
        _k("min.insync.replicas", T.INT, "1", "Minimum ISR size for acks=all.",
           synonyms=(("min.insync.replicas", 1),)),
        _k("retention.bytes", T.LONG, "-1", "Retention size per partition.",
           synonyms=(("log.retention.bytes", 1),)),
        _k("retention.ms", T.LONG, "604800000", "Retention time.",
           synonyms=(("log.retention.ms", 1), ("log.retention.minutes", MINUTE_MS),
                     ("log.retention.hours", HOUR_MS))),
        _k("segment.bytes", T.INT, "1073741824", "Size of a single log segment.",
           synonyms=(("log.segment.bytes", 1),)),
        _k("segment.index.bytes", T.INT, "10485760", "Maximum offset index size.",
           synonyms=(("log.index.size.max.bytes", 1),)),
        _k("segment.ms", T.LONG, "604800000", "Time before a new segment is rolled out.",
           synonyms=(("log.roll.ms", 1), ("log.roll.hours", HOUR_MS))),
        _k("unclean.leader.election.enable", T.BOOLEAN, "false", "Elect out-of-sync leaders.",
           synonyms=(("unclean.leader.election.enable", 1),)),
    ]
}


def validate_value(key: ConfigKey, value: str) -> str:
    """The value in canonical form, or ConfigError naming the key."""
    def invalid(reason: str) -> ConfigError:
        return ConfigError(f"Invalid value {value} for configuration {key.name}: {reason}")

    if key.type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE):
        bits = {ConfigType.SHORT: 16, ConfigType.INT: 32, ConfigType.LONG: 64}.get(key.type)
        try:
            number = float(value) if bits is None else int(value.strip())
        except ValueError:
            raise invalid(f"Not a number of type {key.type.name}") from None
        if bits is not None and not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
            raise invalid(f"Not a number of type {key.type.name}")
        if key.minimum is not None and number < key.minimum:
            raise invalid(f"Value must be at least {key.minimum}")
        return str(number)
    if key.type is ConfigType.BOOLEAN:
        lowered = value.strip().lower()
        if lowered not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        return lowered
    if key.type is ConfigType.LIST:
        items = [item.strip() for item in value.split(",") if item.strip()]
        if key.choices and any(item not in key.choices for item in items):
            raise invalid(f"String must be one of: {', '.join(key.choices)}")
        return ",".join(items)
    if key.choices and value not in key.choices:
        raise ConfigError(
            f"Invalid value {value} for configuration {key.name}: "
            f"String must be one of: {', '.join(key.choices)}"
        )
    return value


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the subset server.properties files use: key=value, # and ! comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            props[line] = ""
        else:
            props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Listener]:
    listeners = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep:
            raise ConfigError(f"Invalid listener {item!r}: expected NAME://host:port")
        host, _, port = rest.rpartition(":")
        listeners.append(Listener(name, host.strip("[]"), int(port)))
    return listeners


# Dynamic broker configs by resource name: "" is the cluster-wide default, "<node id>" one
# broker's own. The metadata image owns this mapping (ConfigRecords replayed); a broker's
# `BrokerConfig.dynamic` is a live view of it.
DynamicConfigs = Mapping[str, Mapping[str, str]]

# Group configs (KIP-848, Kafka's GroupConfig): a consumer group's own session timeout and
# heartbeat interval, over the broker's defaults (the synonym), within the broker's bounds.
GROUP_CONFIGS: dict[str, ConfigKey] = {
    c.name: c
    for c in [
        _k("consumer.session.timeout.ms", T.INT, "45000",
           "KIP-848 groups: this group's session timeout.",
           synonyms=(("group.consumer.session.timeout.ms", 1),)),
        _k("consumer.heartbeat.interval.ms", T.INT, "5000",
           "KIP-848 groups: this group's heartbeat interval.",
           synonyms=(("group.consumer.heartbeat.interval.ms", 1),)),
    ]
}

# Broker keys that change without a restart: Kafka's DynamicLogConfig (the broker defaults
# of topic configs) and its DynamicProducerStateManagerConfig (transaction verification and
# producer id expiration). Every other broker config is read-only.
DYNAMIC_BROKER_CONFIGS = frozenset(
    synonym for key in TOPIC_CONFIGS.values() for synonym, _ in key.synonyms
) | {"transaction.partition.verification.enable", "producer.id.expiration.ms"}


class BrokerConfig:
    """One broker's configuration: dynamic keys (this broker's, then the cluster-wide
    default) over static keys (server.properties, --override) over Kafka's defaults."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.explicit: dict[str, str] = {}
        for name, value in props.items():
            key = BROKER_CONFIGS.get(name)
            self.explicit[name] = validate_value(key, value) if key else value
        self.dynamic: DynamicConfigs = {}

    @classmethod
    def load(cls, path: Path | None, overrides: Iterable[str] = ()) -> BrokerConfig:
        props = parse_properties(path.read_text()) if path else {}
        for override in overrides:
            name, sep, value = override.partition("=")
            if not sep:
                raise ConfigError(f"--override expects key=value, got {override!r}")
            props[name.strip()] = value.strip()
        return cls(props)

    def layers(self, name: str) -> list[tuple[str, ConfigSource]]:
        """Every value set for `name`, most specific first (the winner first)."""
        found = []
        if name in DYNAMIC_BROKER_CONFIGS:
            for resource, source in ((str(self.node_id), ConfigSource.DYNAMIC_BROKER_CONFIG),
                                     ("", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
                value = self.dynamic.get(resource, {}).get(name)
                if value is not None:
                    found.append((value, source))
        if name in self.explicit:
            found.append((self.explicit[name], ConfigSource.STATIC_BROKER_CONFIG))
        return found

    def get(self, name: str) -> str | None:
        layers = self.layers(name)
        if layers:
            return layers[0][0]
        key = BROKER_CONFIGS.get(name)
        return key.default if key else None

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if value is None:
            raise ConfigError(f"Missing required configuration {name}")
        return int(value)

    def get_bool(self, name: str) -> bool:
        return self.get(name) == "true"

    @property
    def node_id(self) -> int:
        if "node.id" in self.explicit:
            return int(self.explicit["node.id"])
        broker_id = int(self.explicit.get("broker.id", "-1"))
        return broker_id if broker_id >= 0 else int(BROKER_CONFIGS["node.id"].default or 1)

    @property
    def log_dirs(self) -> list[Path]:
        raw = self.explicit.get("log.dirs") or self.explicit.get("log.dir") or "/tmp/kafka-logs"
        return [Path(item.strip()) for item in raw.split(",") if item.strip()]

    @property
    def metadata_log_dir(self) -> Path:
        explicit = self.explicit.get("metadata.log.dir")
        return Path(explicit) if explicit else self.log_dirs[0]

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners") or "")

    def topic_default(self, name: str) -> tuple[str | None, ConfigSource]:
        """A topic config's value when the topic does not override it, and where it came from:
        the first of its broker synonyms set anywhere, else Kafka's default."""
        key = TOPIC_CONFIGS[name]
        for synonym, scale in key.synonyms:
            layers = self.layers(synonym)
            if layers:
                value, source = layers[0]
                return (str(int(value) * scale) if scale != 1 else value), source
        return key.default, ConfigSource.DEFAULT_CONFIG

    def broker_value(self, name: str) -> tuple[str | None, ConfigSource]:
        layers = self.layers(name)
        if layers:
            return layers[0]
        key = BROKER_CONFIGS[name]
        if name == "log.retention.ms":
            return self.topic_default("retention.ms")[0], ConfigSource.DEFAULT_CONFIG
        return key.default, ConfigSource.DEFAULT_CONFIG
