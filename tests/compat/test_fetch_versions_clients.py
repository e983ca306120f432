"""Real clients at the Fetch, Produce and group versions of a Kafka 4.0 broker.

kafka-python 3 keeps a fetch session (KIP-227) per broker and sends incremental fetches;
librdkafka negotiates Fetch v16, naming topics by id. (kafka-python's group members also
leave with LeaveGroup v5 now: `test_groups_kafka_python.py`.)
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import confluent_kafka
import kafka
import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from tests.compat.clients import Message, confluent_produce, new_topic

PARTITIONS = 6


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = new_topic("fetch-versions")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    finally:
        admin.close()
    return name


def produce(bootstrap: str, topic: str, tag: str, partitions: range) -> set[bytes]:
    messages = [Message(None, f"{tag}-{p}-{i}".encode(), partition=p)
                for p in partitions for i in range(5)]
    confluent_produce(bootstrap, topic, messages)
    return {m.value for m in messages if m.value is not None}


def poll_until(consumer: kafka.KafkaConsumer, seen: list[bytes], count: int) -> None:
    deadline = time.monotonic() + 30
    while len(seen) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            seen += [r.value for r in records]


def test_kafka_python_consumes_through_an_incremental_fetch_session(
    kafka_bootstrap: str, topic: str,
) -> None:
    first = produce(kafka_bootstrap, topic, "first", range(PARTITIONS))
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=kafka_bootstrap,
                                   group_id=f"sessions-{uuid.uuid4().hex[:6]}",
                                   auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        seen: list[bytes] = []
        poll_until(consumer, seen, len(first))
        later = produce(kafka_bootstrap, topic, "later", range(2, 3))
        poll_until(consumer, seen, len(first) + len(later))
        [session] = consumer._fetcher._session_handlers.values()
        metadata = session.next_metadata
    finally:
        consumer.close()
    assert sorted(seen) == sorted(first | later)  # each once, none lost
    # The session the first (full) fetch opened carried the later records incrementally.
    assert metadata.session_id != 0 and metadata.epoch >= 2
    assert len(session.session_partitions) == PARTITIONS


def test_librdkafka_fetches_by_topic_id_at_v16(kafka_bootstrap: str, topic: str) -> None:
    values = produce(kafka_bootstrap, topic, "rd", range(PARTITIONS))
    sent: list[str] = []

    class Requests(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sent.append(record.getMessage())

    logger = logging.getLogger(f"librdkafka-{topic}")
    logger.addHandler(Requests())
    logger.setLevel(logging.DEBUG)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka_bootstrap, "group.id": f"rd-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest", "debug": "protocol", "logger": logger,
    })
    consumer.subscribe([topic])
    seen: set[bytes | None] = set()
    deadline = time.monotonic() + 30
    try:
        while len(seen) < len(values) and time.monotonic() < deadline:
            message: Any = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
    finally:
        consumer.close()
    assert seen == values
    assert any("Sent FetchRequest (v16" in line for line in sent)
