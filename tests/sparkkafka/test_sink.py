"""``df.write`` and ``writeStream`` into the built-in broker with Spark's sink columns, read back
with confluent-kafka."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.sparkkafka.topics import create_topic, produce


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    """Every committed record of the topic, read to the end offsets known after ``expected``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[Any] = []
    at_end: set[int] = set()
    while len(at_end) < partitions or len(messages) < expected:
        m = consumer.poll(5)
        assert m is not None, f"{len(messages)} of {expected} records from {topic}"
        if m.error():
            at_end.add(m.partition())
            continue
        messages.append(m)
    consumer.close()
    return messages


def test_a_batch_write_keeps_keys_headers_and_partitions(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 3)
    rows = [(f"k{i}", f"v{i}".encode(), i % 3, [("h", str(i).encode())]) for i in range(30)]
    header = "STRUCT<key STRING, value BINARY>"
    df = spark.createDataFrame(
        rows, f"key STRING, value BINARY, partition INT, headers ARRAY<{header}>"
    )
    # Python Data Sources take only append or overwrite: save() alone means ErrorIfExists.
    writer = df.write.mode("append").format("millrace-kafka")
    writer.option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", topic).save()
    got = consume(kafka_bootstrap, topic, 3, 30)
    assert sorted((m.partition(), m.key().decode(), m.value(), m.headers()) for m in got) == sorted(
        (p, k, v, h) for k, v, p, h in rows
    )


def test_the_topic_column_routes_rows_and_the_option_wins(spark: Any, kafka_bootstrap: str) -> None:
    a, b, forced = (create_topic(kafka_bootstrap, 1) for _ in range(3))
    df = spark.createDataFrame([(a, "1"), (b, "2"), (a, "3")], "topic STRING, value STRING")
    writer = df.write.mode("append").format("millrace-kafka")
    writer = writer.option("kafka.bootstrap.servers", kafka_bootstrap)
    writer.save()
    assert sorted(m.value() for m in consume(kafka_bootstrap, a, 1, 2)) == [b"1", b"3"]
    assert [m.value() for m in consume(kafka_bootstrap, b, 1, 1)] == [b"2"]
    writer.option("topic", forced).save()
    assert sorted(m.value() for m in consume(kafka_bootstrap, forced, 1, 3)) == [b"1", b"2", b"3"]


@pytest.mark.parametrize(
    ("ddl", "options", "message"),
    [
        ("key STRING", {"topic": "t"}, "needs a value column"),
        ("value STRING", {}, "give option topic or a topic column"),
        ("value INT", {"topic": "t"}, "column value must be binary or string"),
        ("value STRING", {"topic": "t", "deliveryGuarantee": "maybe"}, "deliveryGuarantee"),
        ("value STRING", {"topic": "t", "kafka.transactional.id": "x"}, "set by the sink"),
    ],
)
def test_a_frame_the_sink_cannot_write_is_refused_naming_why(
    spark: Any, kafka_bootstrap: str, ddl: str, options: dict[str, str], message: str
) -> None:
    writer = spark.createDataFrame([], ddl).write.mode("append").format("millrace-kafka")
    writer = writer.option("kafka.bootstrap.servers", kafka_bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception, match=message):
        writer.save()


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_stream_copies_a_topic(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    source, sink = create_topic(kafka_bootstrap, 2), create_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, source, [(i % 2, b"k", str(i).encode(), None) for i in range(200)])
    query = (
        spark.readStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", source)
        .option("maxOffsetsPerTrigger", "70")
        .load()
        .selectExpr("key", "CONCAT('copy-', CAST(value AS STRING)) AS value")
        .writeStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", sink)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    got = consume(kafka_bootstrap, sink, 2, 200)
    assert sorted(m.value().decode() for m in got) == sorted(f"copy-{i}" for i in range(200))
    # One key, so Java's partitioner puts every record in one partition, as Spark's sink does.
    assert len({m.partition() for m in got}) == 1
