"""The metadata image: cluster state as the replay of metadata records.

Records are plain JSON objects with a "type". The image changes only in `apply`; the
controller decides which records to write, and every broker builds the same image by
replaying the same log (Kafka's KRaft design).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

Record = dict[str, Any]

# The fields a `partition_change` record may carry (it always bumps `partition_epoch`).
PARTITION_CHANGE_FIELDS = (
    "replicas", "isr", "leader", "leader_epoch", "adding_replicas", "removing_replicas",
)


@dataclass
class BrokerRegistration:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    epoch: int = 0
    incarnation: str = ""  # a new one per process start: tells a restart from a retry


@dataclass
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # While a reassignment runs, `replicas` is the target plus the current replicas;
    # `adding_replicas` are target replicas not yet caught up, `removing_replicas` leave at
    # the end (KIP-455). Both empty when no reassignment is in progress.
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


@dataclass
class TopicImage:
    name: str
    topic_id: str
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[str, TopicImage] = {}
        self.broker_configs: dict[str, str] = {}
        self.producer_id_block_end = 0  # producer ids below this have been handed out
        self.offset = -1  # the offset of the last applied record

    def apply(self, record: Record, offset: int) -> None:
        handler = getattr(self, f"_apply_{record['type']}", None)
        if handler is None:
            raise ValueError(f"unknown metadata record type {record['type']!r}")
        handler(record)
        self.offset = offset

    def copy(self) -> MetadataImage:
        return copy.deepcopy(self)

    def _apply_cluster(self, r: Record) -> None:
        self.cluster_id = r["cluster_id"]

    def _apply_broker(self, r: Record) -> None:
        self.brokers[r["node_id"]] = BrokerRegistration(
            r["node_id"], r["host"], r["port"], r.get("rack"), r.get("fenced", False),
            r.get("epoch", 0), r.get("incarnation", ""),
        )

    def _apply_fence_broker(self, r: Record) -> None:
        self.brokers[r["node_id"]].fenced = r["fenced"]

    def _apply_topic(self, r: Record) -> None:
        topic = TopicImage(r["name"], r["topic_id"])
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def _apply_partition(self, r: Record) -> None:
        topic = self.topics_by_id[r["topic_id"]]
        topic.partitions[r["partition"]] = PartitionRegistration(
            list(r["replicas"]), list(r["isr"]), r["leader"], r.get("leader_epoch", 0),
            r.get("partition_epoch", 0), list(r.get("adding_replicas", [])),
            list(r.get("removing_replicas", [])),
        )

    def _apply_partition_change(self, r: Record) -> None:
        part = self.topics_by_id[r["topic_id"]].partitions[r["partition"]]
        for name in PARTITION_CHANGE_FIELDS:
            if name in r:
                value = r[name]
                setattr(part, name, list(value) if isinstance(value, list) else value)
        part.partition_epoch += 1

    def _apply_remove_topic(self, r: Record) -> None:
        topic = self.topics_by_id.pop(r["topic_id"])
        del self.topics[topic.name]

    def _apply_producer_ids(self, r: Record) -> None:
        self.producer_id_block_end = r["block_end"]

    def _apply_config(self, r: Record) -> None:
        if r["resource"] == "topic":
            configs = self.topics[r["name"]].configs
        else:
            configs = self.broker_configs
        if r["value"] is None:
            configs.pop(r["key"], None)
        else:
            configs[r["key"]] = r["value"]
