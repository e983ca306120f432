"""Fixtures shared by the clusterclient tests against the session broker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer


@pytest.fixture
def member(kafka_bootstrap: str) -> Iterator[Callable[..., Consumer]]:
    consumers: list[Consumer] = []

    def join(group: str, topic: str, protocol: str = "classic") -> Consumer:
        consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group,
                             "client.id": "lag-tester", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "group.protocol": protocol})
        consumer.subscribe([topic])
        consumers.append(consumer)
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment(), "the consumer never got its partitions"
        return consumer

    yield join
    for consumer in consumers:
        consumer.close()
