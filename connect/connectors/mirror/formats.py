"""The bytes of MirrorMaker 2's internal records and its topic names, as Kafka writes them,
so that Kafka's own tools (and a Java MirrorMaker) read ours and we read theirs.

Every field is a Kafka protocol primitive, big-endian: STRING is an int16 length and UTF-8
bytes, then INT16, INT32, INT64.

- Offset sync (`mm2-offset-syncs.<alias>.internal`): key {topic: STRING, partition: INT32},
  value {upstreamOffset: INT64, offset: INT64}; no version.
- Checkpoint (`<source>.checkpoints.internal`): key {group: STRING, topic: STRING,
  partition: INT32}, value {version: INT16 = 0, upstreamOffset: INT64, offset: INT64,
  metadata: STRING}. The key's topic is the remote topic (`A.orders`).
- Heartbeat (`heartbeats`): key {sourceClusterAlias: STRING, targetClusterAlias: STRING},
  value {version: INT16 = 0, timestamp: INT64}.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

VERSION = 0
HEARTBEATS_TOPIC = "heartbeats"


class FormatError(ValueError):
    """Bytes that are not the record they should be."""


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise FormatError("record too short")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return int(value)

    def string(self) -> str:
        size = self.take(">h")
        if size < 0 or self.at + size > len(self.data):
            raise FormatError("bad string length")
        text = self.data[self.at:self.at + size].decode()
        self.at += size
        return text


def _reader(data: bytes | None) -> _Reader:
    if data is None:
        raise FormatError("no bytes")
    return _Reader(data)


@dataclass(frozen=True)
class OffsetSync:
    """Record `upstream_offset` of the source topic-partition is `downstream_offset` in the
    remote topic."""
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k, v = _reader(key), _reader(value)
        topic, partition = k.string(), k.take(">i")
        return cls(topic, partition, v.take(">q"), v.take(">q"))


@dataclass(frozen=True)
class Checkpoint:
    """Group `group` committed `upstream_offset` on the source; on the target that is
    `downstream_offset` of `topic` (the remote topic)."""
    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return (struct.pack(">hqq", VERSION, self.upstream_offset, self.downstream_offset)
                + _string(self.metadata))

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        k, v = _reader(key), _reader(value)
        group, topic, partition = k.string(), k.string(), k.take(">i")
        if v.take(">h") != VERSION:
            raise FormatError("unknown checkpoint version")
        upstream, downstream = v.take(">q"), v.take(">q")
        return cls(group, topic, partition, upstream, downstream, v.string())


@dataclass(frozen=True)
class Heartbeat:
    source_alias: str
    target_alias: str
    timestamp: int  # ms since the epoch, when it was emitted

    def key(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value(self) -> bytes:
        return struct.pack(">hq", VERSION, self.timestamp)

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        k, v = _reader(key), _reader(value)
        source, target = k.string(), k.string()
        if v.take(">h") != VERSION:
            raise FormatError("unknown heartbeat version")
        return cls(source, target, v.take(">q"))


class ReplicationPolicy:
    """Kafka's DefaultReplicationPolicy: a remote topic is `<source alias><separator><topic>`
    and the internal topics' names follow from the aliases."""
    kafka_class = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"

    def __init__(self, separator: str = ".") -> None:
        self.separator = separator

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias a remote topic came from; None for a topic of this cluster's own."""
        alias, sep, _ = topic.partition(self.separator)
        return alias if sep and alias else None

    def upstream_topic(self, topic: str) -> str | None:
        return topic.partition(self.separator)[2] if self.topic_source(topic) else None

    def offset_syncs_topic(self, alias: str) -> str:
        return f"mm2-offset-syncs.{alias}.internal"

    def checkpoints_topic(self, source_alias: str) -> str:
        return f"{source_alias}.checkpoints.internal"

    def is_internal(self, topic: str) -> bool:
        """Kafka's rule: MirrorMaker's and Connect's own topics, and `__`/`.` prefixed ones."""
        return topic.endswith(".internal") or topic.startswith(("__", "."))

    def is_heartbeats(self, topic: str) -> bool:
        return topic == HEARTBEATS_TOPIC or topic.endswith(self.separator + HEARTBEATS_TOPIC)


class IdentityReplicationPolicy(ReplicationPolicy):
    """Kafka's IdentityReplicationPolicy: remote topics keep their names (no cycle
    detection, so only for one-way flows); heartbeats still get the alias."""
    kafka_class = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if topic == HEARTBEATS_TOPIC:
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self.is_heartbeats(topic) else None


POLICIES = {cls.kafka_class: cls for cls in (ReplicationPolicy, IdentityReplicationPolicy)}


def policy(name: str, separator: str) -> ReplicationPolicy:
    for full, cls in POLICIES.items():
        if name in (full, full.rsplit(".", 1)[1]):
            return cls(separator)
    raise ValueError(f"unknown replication policy {name}")


def compile_list(patterns: list[str]) -> re.Pattern[str]:
    """Kafka's topic and group filters: a comma-separated list of regexes, one to match
    the whole name."""
    return re.compile("|".join(f"(?:{p})" for p in patterns) or "(?!)")
