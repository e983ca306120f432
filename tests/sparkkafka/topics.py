"""Topics for the connector's tests: created with a unique name, filled with exact records."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, partitions: int, name: str | None = None) -> str:
    name = name or f"ds-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


Record = tuple[int, bytes | None, bytes, int | None]  # partition, key, value, timestamp ms


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[Record],
    compression: str = "none",
    headers: list[tuple[str, bytes]] | None = None,
) -> None:
    """(partition, key, value, timestamp ms) in order."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 20}
    )
    for partition, key, value, ts in records:
        producer.produce(topic, value, key, partition=partition, timestamp=ts or 0, headers=headers)
    assert producer.flush(30) == 0
