"""The metadata snapshot: brokers, controller, topics and their partitions, as frozen values."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from .errors import error_value


class TopicPartition(NamedTuple):
    """A partition's name. A tuple, not a frozen dataclass: the collector keys dicts and sets
    by it tens of thousands of times a cycle, and a tuple hashes and compares in C (the
    dataclass's generated __hash__ and __eq__ are Python calls); it orders the same."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int  # -1: no leader (offline)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: str | None = None  # a Kafka error name, e.g. LEADER_NOT_AVAILABLE

    @property
    def offline(self) -> bool:
        return self.leader == -1

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    # The platform's rule, as the REST proxy's v2/v3 JSON has always had it: a "__" prefix
    # (__consumer_offsets, __transaction_state). Metadata v1+ carries no flag librdkafka shows.
    internal: bool
    partitions: tuple[PartitionMetadata, ...]  # by partition id
    error: str | None = None  # set while the topic is being created or is unknown

    @cached_property
    def _by_id(self) -> dict[int, PartitionMetadata]:
        return {p.partition: p for p in self.partitions}

    def partition(self, partition_id: int) -> PartitionMetadata | None:
        return self._by_id.get(partition_id)

    @property
    def partition_ids(self) -> list[int]:
        return [p.partition for p in self.partitions]

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int  # -1 when unknown; in KRaft any broker's id, not the active controller
    brokers: tuple[Broker, ...]  # by node id
    topics: Mapping[str, TopicMetadata]  # by name, sorted
    taken_at: float = field(default_factory=time.time)  # wall clock, seconds

    def broker(self, node_id: int) -> Broker | None:
        return next((b for b in self.brokers if b.node_id == node_id), None)

    @property
    def partitions(self) -> list[PartitionMetadata]:
        return [p for t in self.topics.values() for p in t.partitions]

    def leaders(self) -> dict[int, int]:
        """How many partitions each broker leads (brokers leading none included)."""
        counts = {b.node_id: 0 for b in self.brokers}
        for p in self.partitions:
            if not p.offline:
                counts[p.leader] = counts.get(p.leader, 0) + 1
        return counts


def from_confluent(metadata: Any) -> ClusterMetadata:
    """A snapshot of confluent-kafka's ClusterMetadata (AdminClient.list_topics)."""
    brokers = tuple(Broker(b.id, b.host, b.port)
                    for b in sorted(metadata.brokers.values(), key=lambda b: b.id))
    topics = {}
    for name in sorted(metadata.topics):
        t = metadata.topics[name]
        err = error_value(t.error, name)
        partitions = tuple(
            PartitionMetadata(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs),
                              _name(error_value(p.error, name, p.id)))
            for p in sorted(t.partitions.values(), key=lambda p: p.id)
        )
        topics[name] = TopicMetadata(name, name.startswith("__"), partitions, _name(err))
    return ClusterMetadata(metadata.cluster_id, metadata.controller_id, brokers, topics)


def _name(error: Any) -> str | None:
    return None if error is None else str(error.code_name)
