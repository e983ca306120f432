"""Produce and consume with each real client, in one shape the conformance tests compare.

Each client library is used the way its own documentation shows, with its defaults except
where a test needs otherwise (kafka-python 3's defaults include idempotence and acks=all).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from dataclasses import dataclass

import aiokafka
import confluent_kafka
import kafka

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None
    offset: int = -1
    partition: int = 0


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sample_messages(count: int, base_ts: int | None = None) -> list[Message]:
    base_ts = base_ts or (int(time.time() * 1000) - 60_000)
    return [
        Message(
            key=f"key-{i}".encode(),
            value=(f"value-{i}-".encode() * (1 + i % 40)),
            headers=(("trace", f"t{i}".encode()), ("n", str(i).encode())),
            timestamp=base_ts + i * 10,
        )
        for i in range(count)
    ]


# -- confluent-kafka (librdkafka) -----------------------------------------------------------
def confluent_produce(bootstrap: str, topic: str, messages: list[Message], codec: str = "none",
                      **config: object) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, **config,
    })
    errors: list[object] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for m in messages:
        producer.produce(topic, value=m.value, key=m.key, headers=list(m.headers),
                         timestamp=m.timestamp or 0, partition=m.partition,
                         on_delivery=delivered)
    assert producer.flush(30) == 0, "messages still in flight after 30s"
    assert not errors, errors


def confluent_consume(bootstrap: str, topic: str, count: int, partition: int = 0,
                      offset: int = confluent_kafka.OFFSET_BEGINNING) -> list[Message]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    consumer.assign([confluent_kafka.TopicPartition(topic, partition, offset)])
    out: list[Message] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(Message(msg.key(), msg.value(), tuple(msg.headers() or ()),
                               msg.timestamp()[1], msg.offset(), msg.partition()))
    finally:
        consumer.close()
    return out


def confluent_consume_all(bootstrap: str, topic: str, partition: int = 0) -> list[Message]:
    """Everything from the log start up to the high watermark."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        low, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()
    return confluent_consume(bootstrap, topic, high - low, partition, offset=low)


def no_open_transaction(bootstrap: str, topic: str, partitions: int) -> bool:
    """Every partition's last stable offset is its high watermark: no transaction holds a
    read_committed end back, its markers included (the broker writes those after answering
    EndTxn). False too while a broker cannot answer (a cluster failing over): ask again."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap,
                                           "group.id": f"ends-{uuid.uuid4().hex[:8]}",
                                           "isolation.level": isolation})
        try:
            ends.append([reader.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p),
                                                      10, cached=False)[1]
                         for p in range(partitions)])
        except confluent_kafka.KafkaException:
            return False
        finally:
            reader.close()
    return ends[0] == ends[1]


# -- kafka-python 3 ----------------------------------------------------------------------------
def kafka_python_produce(bootstrap: str, topic: str, messages: list[Message],
                         codec: str = "none") -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    futures = [
        producer.send(topic, value=m.value, key=m.key, headers=list(m.headers),
                      timestamp_ms=m.timestamp, partition=m.partition)
        for m in messages
    ]
    producer.flush(30)
    for future in futures:
        future.get(timeout=30)
    producer.close()


def kafka_python_consume(bootstrap: str, topic: str, count: int,
                         partition: int = 0) -> list[Message]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   auto_offset_reset="earliest")
    tp = kafka.TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out: list[Message] = []
    deadline = time.monotonic() + 30
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            out += [Message(r.key, r.value, tuple(r.headers), r.timestamp, r.offset, r.partition)
                    for r in records]
    consumer.close()
    return out


# -- aiokafka --------------------------------------------------------------------------------
def aiokafka_produce(bootstrap: str, topic: str, messages: list[Message],
                     codec: str = "none") -> None:
    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
            linger_ms=5,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value=m.value, key=m.key, headers=list(m.headers),
                                    timestamp_ms=m.timestamp, partition=m.partition)
                for m in messages
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[Message]:
    async def run() -> list[Message]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                             enable_auto_commit=False,
                                             auto_offset_reset="earliest")
        await consumer.start()
        tp = aiokafka.TopicPartition(topic, partition)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        out: list[Message] = []
        deadline = time.monotonic() + 30
        try:
            while len(out) < count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += [Message(r.key, r.value, tuple(r.headers), r.timestamp, r.offset,
                                    r.partition) for r in records]
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())


# -- kcat (Debian's, librdkafka 2.0.x) ---------------------------------------------------------
def kcat_produce(bootstrap: str, topic: str, messages: list[Message], codec: str = "none") -> None:
    """kcat takes one key:value per line and one header set for all of them."""
    headers = messages[0].headers
    args = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-p", "0"]
    if codec != "none":
        args += ["-z", codec]
    for name, value in headers:
        args += ["-H", f"{name}={value.decode()}"]
    lines = b"".join((m.key or b"") + b"\t" + (m.value or b"") + b"\n" for m in messages)
    subprocess.run(args, input=lines, check=True, timeout=60, capture_output=True)


def kcat_consume(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[Message]:
    result = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", "beginning",
         "-c", str(count), "-e", "-J"],
        check=True, timeout=60, capture_output=True,
    )
    out = []
    for line in result.stdout.splitlines():
        record = json.loads(line)
        headers = record.get("headers") or []
        pairs = tuple((headers[i], headers[i + 1].encode()) for i in range(0, len(headers), 2))
        key = record.get("key")
        payload = record.get("payload")
        out.append(Message(key.encode() if key is not None else None,
                           payload.encode() if payload is not None else None,
                           pairs, record.get("ts"), record["offset"], record["partition"]))
    return out


PRODUCERS = {"confluent": confluent_produce, "kafka-python": kafka_python_produce,
             "aiokafka": aiokafka_produce, "kcat": kcat_produce}
CONSUMERS = {"confluent": confluent_consume, "kafka-python": kafka_python_consume,
             "aiokafka": aiokafka_consume, "kcat": kcat_consume}
