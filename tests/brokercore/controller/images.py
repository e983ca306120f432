"""Metadata images built from records, for testing the pure decision functions."""

from __future__ import annotations

from brokercore.controller.image import MetadataImage, PartitionRegistration, Record

TOPIC_ID = "tid-t"


class Images:
    """An image and the log that built it: `write` applies records as the controller would."""

    def __init__(self, brokers: int = 3, *, fenced: tuple[int, ...] = ()) -> None:
        self.image = MetadataImage()
        self.offset = -1
        self.write([{"type": "cluster", "cluster_id": "c"}])
        self.write([
            {"type": "broker", "node_id": b, "host": "127.0.0.1", "port": 9091 + b,
             "fenced": b in fenced, "epoch": 0, "incarnation": f"inc-{b}"}
            for b in range(1, brokers + 1)
        ])
        self.write([{"type": "topic", "name": "t", "topic_id": TOPIC_ID}])

    def write(self, records: list[Record]) -> None:
        for record in records:
            self.offset += 1
            self.image.apply(record, self.offset)

    def partition(self, index: int, replicas: list[int], isr: list[int] | None = None,
                  leader: int | None = None, **fields: object) -> None:
        isr = list(replicas) if isr is None else isr
        self.write([{"type": "partition", "topic_id": TOPIC_ID, "partition": index,
                     "replicas": replicas, "isr": isr,
                     "leader": isr[0] if leader is None else leader, "leader_epoch": 0,
                     **fields}])

    def topic_config(self, key: str, value: str) -> None:
        self.write([{"type": "config", "resource": "topic", "name": "t", "key": key,
                     "value": value}])

    def part(self, index: int = 0) -> PartitionRegistration:
        return self.image.topics["t"].partitions[index]
