"""Metadata images built from records, for testing the pure decision functions."""

from __future__ import annotations

from collections.abc import Sequence

from brokercore.controller.image import MetadataImage, PartitionRegistration
from brokercore.controller.records import (
    BrokerRecord,
    ClusterRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    TopicRecord,
)

TOPIC_ID = "tid-t"


class Images:
    """An image and the log that built it: `write` applies records as the controller would."""

    def __init__(self, brokers: int = 3, *, fenced: tuple[int, ...] = ()) -> None:
        self.image = MetadataImage()
        self.offset = -1
        self.write([ClusterRecord("c")])
        self.write([
            BrokerRecord(b, "127.0.0.1", 9091 + b, fenced=b in fenced, incarnation=f"inc-{b}")
            for b in range(1, brokers + 1)
        ])
        self.write([TopicRecord("t", TOPIC_ID)])

    def write(self, records: Sequence[MetadataRecord]) -> None:
        for record in records:
            self.offset += 1
            self.image.apply(record, self.offset)

    def partition(self, index: int, replicas: list[int], isr: list[int] | None = None,
                  leader: int | None = None) -> None:
        isr = list(replicas) if isr is None else isr
        self.write([PartitionRecord(TOPIC_ID, index, tuple(replicas), tuple(isr),
                                    isr[0] if leader is None else leader)])

    def topic_config(self, key: str, value: str) -> None:
        self.write([ConfigRecord("topic", "t", key, value)])

    def part(self, index: int = 0) -> PartitionRegistration:
        return self.image.topics["t"].partitions[index]
