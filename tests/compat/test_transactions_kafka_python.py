"""Transactions through kafka-python: a committed and an aborted transaction read back with
read_committed, and the admin views of transactions (ListTransactions,
DescribeTransactions, DescribeProducers) while one is open."""

from __future__ import annotations

import time
import uuid
from typing import Any

import kafka
from kafka.admin import KafkaAdminClient

from tests.compat.clients import no_open_transaction
from tests.compat.groups import PARTITIONS, create_topic, wait_until

TIMEOUT_MS = 30_000


def _read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value in the topic, read to each partition's end once no transaction holds that
    end back (the broker writes the markers after answering EndTxn); not until some seconds
    pass without a record: what a broker served wrongly comes before the end."""
    wait_until(lambda: no_open_transaction(bootstrap, topic, PARTITIONS),
               f"{topic}'s markers written")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                   auto_offset_reset="earliest", isolation_level=isolation)
    partitions = [kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    ends = consumer.end_offsets(partitions)
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while any(consumer.position(tp) < ends[tp] for tp in partitions):
        assert time.monotonic() < deadline, f"{topic} not read to {ends}"
        for batch in consumer.poll(200).values():
            values += [msg.value for msg in batch]
    consumer.close()
    return values


def _producer(bootstrap: str, transactional_id: str) -> kafka.KafkaProducer:
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap,
                                   transactional_id=transactional_id)
    producer.init_transactions()
    return producer


def test_read_committed_returns_the_committed_transaction_and_not_the_aborted_one(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, "kp-txn")
    producer = _producer(kafka_bootstrap, f"kp-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    for i in range(3):
        producer.send(topic, value=f"kept-{i}".encode(), partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(3):
        producer.send(topic, value=f"dropped-{i}".encode(), partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()
    kept = [f"kept-{i}".encode() for i in range(3)]
    assert _read(kafka_bootstrap, topic, "read_committed") == kept
    assert _read(kafka_bootstrap, topic, "read_uncommitted") == kept + [
        f"dropped-{i}".encode() for i in range(3)]


def test_admin_clients_see_an_open_transaction(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, "kp-admin")
    transactional_id = f"kp-admin-{uuid.uuid4().hex[:8]}"
    producer = _producer(kafka_bootstrap, transactional_id)
    producer.begin_transaction()
    producer.send(topic, value=b"first", partition=0)
    producer.send(topic, value=b"second", partition=0)
    producer.flush()
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        [listed] = [t for listings in admin.list_transactions(state_filters=["Ongoing"]).values()
                    for t in listings if t.transactional_id == transactional_id]
        description = admin.describe_transactions([transactional_id])[transactional_id]
        tp = kafka.TopicPartition(topic, 0)
        state = admin.describe_producers([tp])[tp]
    finally:
        admin.close()
    assert description.state == "Ongoing"
    assert description.producer_id == listed.producer_id
    assert {(p.topic, p.partition) for p in description.topic_partitions} == {(topic, 0)}
    assert description.transaction_start_time_ms <= time.time() * 1000
    [active] = state.active_producers
    assert active.producer_id == listed.producer_id
    assert active.current_transaction_start_offset == 0
    producer.abort_transaction()
    producer.close()


def test_consume_transform_produce_commits_the_groups_offsets_with_the_output(
    kafka_bootstrap: str,
) -> None:
    source = create_topic(kafka_bootstrap, "kp-ctp-in")
    sink = create_topic(kafka_bootstrap, "kp-ctp-out")
    feeder = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(5):
        feeder.send(source, f"in-{i}".encode(), partition=0)
    feeder.close()
    group = f"kp-ctp-{uuid.uuid4().hex[:8]}"
    consumer = kafka.KafkaConsumer(
        source, bootstrap_servers=kafka_bootstrap, group_id=group,
        auto_offset_reset="earliest", enable_auto_commit=False,
        isolation_level="read_committed")
    records: list[Any] = []
    deadline = time.monotonic() + 30
    while len(records) < 5 and time.monotonic() < deadline:
        for batch in consumer.poll(500).values():
            records += batch
    producer = _producer(kafka_bootstrap, f"kp-ctp-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    for record in records:
        producer.send(sink, record.value.upper(), partition=0)
    tp = kafka.TopicPartition(source, 0)
    producer.send_offsets_to_transaction({tp: kafka.OffsetAndMetadata(5, "", -1)}, group)
    producer.commit_transaction()
    producer.close()
    committed = consumer.committed(tp)  # while the consumer is still a member of the group
    consumer.close()
    assert committed == 5
    assert _read(kafka_bootstrap, sink, "read_committed") == [
        f"IN-{i}".encode() for i in range(5)]
