"""Transactions through aiokafka: a committed and an aborted transaction read back with
read_committed."""

from __future__ import annotations

import asyncio
import time
import uuid

import aiokafka

from tests.compat.clients import no_open_transaction
from tests.compat.groups import PARTITIONS, create_topic, wait_until


async def _read(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value in the topic, read to each partition's end once no transaction holds that
    end back (the broker writes the markers after answering EndTxn); not until some seconds
    pass without a record: what a broker served wrongly comes before the end."""
    wait_until(lambda: no_open_transaction(bootstrap, topic, PARTITIONS),
               f"{topic}'s markers written")
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                         auto_offset_reset="earliest", isolation_level=isolation)
    await consumer.start()
    partitions = [aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    values: list[bytes] = []
    try:
        ends = await consumer.end_offsets(partitions)
        deadline = time.monotonic() + 30
        while any(at < ends[tp] for tp, at in
                  zip(partitions, [await consumer.position(tp) for tp in partitions],
                      strict=True)):
            assert time.monotonic() < deadline, f"{topic} not read to {ends}"
            batches = await consumer.getmany(timeout_ms=200)
            values += [msg.value for msgs in batches.values() for msg in msgs
                       if msg.value is not None]
    finally:
        await consumer.stop()
    return values


async def _transactions(bootstrap: str, topic: str) -> None:
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:8]}")
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(3):
                await producer.send(topic, f"kept-{i}".encode(), partition=0)
        await producer.begin_transaction()
        sent = [await producer.send(topic, f"dropped-{i}".encode(), partition=0)
                for i in range(3)]
        await asyncio.gather(*sent)
        await producer.abort_transaction()
    finally:
        await producer.stop()


def test_read_committed_returns_the_committed_transaction_and_not_the_aborted_one(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, "aio-txn")
    asyncio.run(_transactions(kafka_bootstrap, topic))
    kept = [f"kept-{i}".encode() for i in range(3)]
    assert asyncio.run(_read(kafka_bootstrap, topic, "read_committed")) == kept
    assert asyncio.run(_read(kafka_bootstrap, topic, "read_uncommitted")) == kept + [
        f"dropped-{i}".encode() for i in range(3)]


async def _commit_offsets(bootstrap: str, topic: str, group: str) -> int | None:
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:8]}")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, b"output", partition=0)
            await producer.send_offsets_to_transaction(
                {aiokafka.TopicPartition(topic, 0): 3}, group)
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                         isolation_level="read_committed")
    await consumer.start()
    try:
        committed: int | None = await consumer.committed(aiokafka.TopicPartition(topic, 0))
        return committed
    finally:
        await consumer.stop()


def test_send_offsets_to_transaction_commits_the_groups_offsets(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, "aio-offsets")
    group = f"aio-{uuid.uuid4().hex[:8]}"
    assert asyncio.run(_commit_offsets(kafka_bootstrap, topic, group)) == 3
