"""Every client produces and consumes through the built-in broker, with every codec."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import pytest

from tests.compat.clients import (
    CODECS,
    CONSUMERS,
    PRODUCERS,
    Message,
    confluent_consume,
    confluent_produce,
    new_topic,
    sample_messages,
)

CLIENTS = list(PRODUCERS)


def _content(messages: list[Message], *, timestamps: bool = True,
             headers: bool = True) -> list[tuple[object, ...]]:
    return [(m.key, m.value, m.headers if headers else (), m.timestamp if timestamps else None)
            for m in messages]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_reads_back_what_it_wrote(kafka_bootstrap: str, client: str,
                                              codec: str) -> None:
    topic = new_topic(f"rt-{client}-{codec}")
    sent = sample_messages(30)
    PRODUCERS[client](kafka_bootstrap, topic, sent, codec)

    got = CONSUMERS[client](kafka_bootstrap, topic, len(sent))

    # kcat sets neither per-message headers nor timestamps; compare what it can send.
    kcat = client == "kcat"
    expected = [Message(m.key, m.value, sent[0].headers if kcat else m.headers, m.timestamp)
                for m in sent]
    assert _content(got, timestamps=not kcat) == _content(expected, timestamps=not kcat)
    assert [m.offset for m in got] == list(range(len(sent)))


@pytest.mark.parametrize("client", CLIENTS)
def test_librdkafka_reads_what_each_client_wrote(kafka_bootstrap: str, client: str) -> None:
    topic = new_topic(f"x-{client}")
    sent = sample_messages(12)
    PRODUCERS[client](kafka_bootstrap, topic, sent, "lz4")

    got = confluent_consume(kafka_bootstrap, topic, len(sent))

    assert [(m.key, m.value) for m in got] == [(m.key, m.value) for m in sent]


def test_seek_by_offset_and_by_timestamp(kafka_bootstrap: str) -> None:
    topic = new_topic("seek")
    base = int(time.time() * 1000) - 100_000
    sent = sample_messages(40, base_ts=base)
    confluent_produce(kafka_bootstrap, topic, sent, "zstd")

    from_offset = confluent_consume(kafka_bootstrap, topic, 5, offset=25)
    assert [m.offset for m in from_offset] == [25, 26, 27, 28, 29]

    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap,
                                         "group.id": "seek-by-time"})
    try:
        [found] = consumer.offsets_for_times(
            [confluent_kafka.TopicPartition(topic, 0, base + 10 * 17 - 5)], timeout=10)
        assert found.offset == 17
        [past_end] = consumer.offsets_for_times(
            [confluent_kafka.TopicPartition(topic, 0, base + 10_000_000)], timeout=10)
        assert past_end.offset == -1  # no such record: the end, as Kafka answers
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                   timeout=10)
        assert (low, high) == (0, 40)
    finally:
        consumer.close()


def test_kafka_python_and_aiokafka_seek_by_offset_and_by_timestamp(kafka_bootstrap: str) -> None:
    import asyncio

    import aiokafka
    import kafka

    topic = new_topic("times")
    base = int(time.time() * 1000) - 50_000
    confluent_produce(kafka_bootstrap, topic, sample_messages(20, base_ts=base))

    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    tp = kafka.TopicPartition(topic, 0)
    found = consumer.offsets_for_times({tp: base + 10 * 7})
    assert found[tp] is not None and found[tp].offset == 7
    assert consumer.end_offsets([tp])[tp] == 20
    consumer.assign([tp])
    consumer.seek(tp, 13)
    records: list[Any] = []
    deadline = time.monotonic() + 20
    while not records and time.monotonic() < deadline:
        records = [r for rs in consumer.poll(timeout_ms=500).values() for r in rs]
    assert [r.offset for r in records][:3] == [13, 14, 15]
    consumer.close()

    async def with_aiokafka() -> None:
        aio = aiokafka.AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap)
        await aio.start()
        try:
            atp = aiokafka.TopicPartition(topic, 0)
            result = await aio.offsets_for_times({atp: base + 10 * 12})
            assert result[atp] is not None and result[atp].offset == 12
            assert (await aio.beginning_offsets([atp]))[atp] == 0
            aio.assign([atp])
            aio.seek(atp, 17)
            record = await asyncio.wait_for(aio.getone(), 20)
            assert record.offset == 17
        finally:
            await aio.stop()

    asyncio.run(with_aiokafka())


def test_admin_list_offsets_earliest_latest_and_max_timestamp(kafka_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic = new_topic("specs")
    base = int(time.time() * 1000) - 30_000
    sent = sample_messages(10, base_ts=base)
    # The largest timestamp sits in the middle of the log, not at its end.
    sent[4] = Message(sent[4].key, sent[4].value, sent[4].headers, base + 5_000)
    confluent_produce(kafka_bootstrap, topic, sent)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    tp = confluent_kafka.TopicPartition(topic, 0)

    def offset_for(spec: OffsetSpec) -> tuple[int, int]:
        result = admin.list_offsets({tp: spec})[tp].result(10)
        return result.offset, result.timestamp

    assert offset_for(OffsetSpec.earliest())[0] == 0
    assert offset_for(OffsetSpec.latest())[0] == 10
    assert offset_for(OffsetSpec.max_timestamp()) == (4, base + 5_000)
    # The first offset, in log order, whose timestamp is at or after the target: offset 4
    # (base + 5000) comes before offset 6 (base + 60).
    assert offset_for(OffsetSpec.for_timestamp(base + 10 * 6))[0] == 4
    assert offset_for(OffsetSpec.for_timestamp(base + 3))[0] == 1
