"""The Kafka Data Source against the built-in broker: exact offsets and contents, split ranges,
compressed batches, timestamps as bounds, and a topic being written while it is read."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from sparkkafka.options import OptionError
from tests.sparkkafka.topics import Record, create_topic, produce


def read(spark: Any, bootstrap: str, **options: str) -> list[Any]:
    reader = spark.read.format("millrace-kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    rows: list[Any] = reader.load().orderBy("topic", "partition", "offset").collect()
    return rows


def test_it_reads_exact_offsets_and_contents_across_split_ranges(
    spark: Any, kafka_bootstrap: str
) -> None:
    topic = create_topic(kafka_bootstrap, 3)
    records: list[Record] = [(i % 3, f"k{i}".encode(), f"v{i}".encode(), None) for i in range(300)]
    produce(kafka_bootstrap, topic, records)
    df = (
        spark.read.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("maxRecordsPerPartition", "30")
        .load()
    )
    assert df.rdd.getNumPartitions() == 3 * (100 // 30 + 1)
    rows = df.orderBy("partition", "offset").collect()
    expected = [
        (p, o, f"k{3 * o + p}".encode(), f"v{3 * o + p}".encode())
        for p in range(3)
        for o in range(100)
    ]
    assert [(r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows] == expected
    assert {r.topic for r in rows} == {topic} and {r.timestampType for r in rows} == {0}


def test_per_partition_json_bounds_pick_exact_ranges(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, [(i % 2, None, str(i).encode(), None) for i in range(40)])
    rows = read(
        spark,
        kafka_bootstrap,
        assign=json.dumps({topic: [0, 1]}),
        startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 8, "1": -1}}),
    )
    assert [(r.partition, r.offset) for r in rows] == [(0, 5), (0, 6), (0, 7)] + [
        (1, o) for o in range(20)
    ]
    assert rows[0].key is None


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd", "snappy"])
def test_it_reads_compressed_batches(spark: Any, kafka_bootstrap: str, compression: str) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    values = [(b"x" * (i % 50)) + str(i).encode() for i in range(500)]
    produce(kafka_bootstrap, topic, [(0, None, v, None) for v in values], compression)
    rows = read(spark, kafka_bootstrap, subscribe=topic, maxRecordsPerPartition="128")
    assert [bytes(r.value) for r in rows] == values
    assert [r.offset for r in rows] == list(range(500))


def test_timestamps_bound_the_read(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    # A minute ago, whole seconds: records older than the topic's retention.ms (7 days)
    # would be deleted by the broker's next retention check, which on the long-lived
    # session broker can fall between the produce and the read.
    base = (int(time.time()) - 60) * 1000
    produce(
        kafka_bootstrap,
        topic,
        [(i % 2, None, str(i).encode(), base + i * 1000) for i in range(20)],
    )
    rows = read(
        spark,
        kafka_bootstrap,
        subscribe=topic,
        startingTimestamp=str(base + 5000),
        endingTimestamp=str(base + 12000),
    )
    # Records 5..11 (timestamps from base+5 s up to, not including, base+12 s).
    assert sorted(int(r.value) for r in rows) == list(range(5, 12))
    assert {int(r.timestamp.timestamp() * 1000) for r in rows} == {
        base + i * 1000 for i in range(5, 12)
    }


def test_headers_come_as_spark_shows_them(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, b"k", b"v", None)], headers=[("h1", b"a"), ("h2", b"")])
    (row,) = read(spark, kafka_bootstrap, subscribe=topic, includeHeaders="true")
    assert [(h.key, bytes(h.value)) for h in row.headers] == [("h1", b"a"), ("h2", b"")]


def test_a_topic_being_written_while_read_gives_a_consistent_prefix(
    spark: Any, kafka_bootstrap: str
) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, [(i % 2, None, str(i).encode(), None) for i in range(200)])
    stop = threading.Event()

    def keep_writing() -> None:
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
        i = 200
        while not stop.is_set():
            try:
                producer.produce(topic, str(i).encode(), partition=i % 2)
            except BufferError:  # the client's queue is full: let it drain
                producer.poll(0.1)
                continue
            producer.poll(0)
            i += 1
            time.sleep(0.002)  # a steady writer, not a flood that turns into thousands of slices
        producer.flush(30)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        time.sleep(0.5)
        rows = read(spark, kafka_bootstrap, subscribe=topic, maxRecordsPerPartition="64")
    finally:
        stop.set()
        writer.join()
    for p in (0, 1):
        offsets = [r.offset for r in rows if r.partition == p]
        assert offsets == list(range(len(offsets))) and len(offsets) >= 100
        values = [int(r.value) for r in rows if r.partition == p]
        assert values == sorted(values) and all(v % 2 == p for v in values)


def test_an_empty_topic_reads_as_no_rows(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    assert read(spark, kafka_bootstrap, subscribe=topic) == []


def test_subscribe_pattern_matches_whole_topic_names(spark: Any, kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, None, b"x", None)])
    assert len(read(spark, kafka_bootstrap, subscribePattern=f"{topic[:8]}.*{topic[-3:]}")) == 1
    assert read(spark, kafka_bootstrap, subscribePattern=topic[:8]) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of subscribe"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of subscribe"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
        ({"subscribe": "a", "startingOffsets": "{oops"}, "startingOffsets is not valid JSON"),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "latest"},
            "kafka.auto.offset.reset is set by the source",
        ),
        ({"subscribe": "a", "maxRecordsPerPartition": "0"}, "maxRecordsPerPartition must be at"),
    ],
)
def test_bad_options_are_refused_naming_the_option(
    spark: Any, kafka_bootstrap: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message):
        read(spark, kafka_bootstrap, **options)


def test_a_start_before_the_log_start_is_data_loss(kafka_bootstrap: str) -> None:
    from sparkkafka.options import parse_options
    from sparkkafka.source import resolve_ranges

    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, None, b"x", None)] * 3)
    opts = {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic}
    with pytest.raises(OptionError, match="past the end offset 3"):
        resolve_ranges(parse_options({**opts, "startingOffsets": json.dumps({topic: {"0": 9}})}))
    (r,) = resolve_ranges(parse_options({**opts, "startingOffsets": json.dumps({topic: {"0": 1}})}))
    assert (r.start, r.end) == (1, 3)



def test_ending_offsets_at_read_reads_to_the_latest_offset_when_each_slice_is_read(
    kafka_bootstrap: str,
) -> None:
    """What a stream-static join's table relies on: Spark plans the slices once per query and
    reads them again each micro-batch; records produced in between are read, each once."""
    from sparkkafka.options import parse_options
    from sparkkafka.source import KafkaReader

    topic = create_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, [(0, None, f"a{i}".encode(), None) for i in range(5)])
    reader = KafkaReader(parse_options({"kafka.bootstrap.servers": kafka_bootstrap,
                                        "subscribe": topic, "maxRecordsPerPartition": "2",
                                        "endingOffsetsAtRead": "true"}))
    slices = reader.partitions()
    # partition 0 in slices of 2, the last open-ended; empty partition 1 gets an open one
    assert [(s.partition, s.start, s.end, s.to_latest) for s in slices] == [
        (0, 0, 2, False), (0, 2, 4, False), (0, 4, 5, True), (1, 0, 0, True)]

    def offsets_read() -> list[tuple[int, int]]:
        batches = [b for s in slices for b in reader.read(s)]
        assert all(isinstance(b, pa.RecordBatch) for b in batches)  # no decoded column
        return sorted((p, o) for b in batches if isinstance(b, pa.RecordBatch)
                      for p, o in zip(b.column("partition").to_pylist(),
                                      b.column("offset").to_pylist(), strict=True))

    assert offsets_read() == [(0, o) for o in range(5)]
    produce(kafka_bootstrap, topic, [(0, None, b"b", None), (1, None, b"c", None)])
    assert offsets_read() == [(0, o) for o in range(6)] + [(1, 0)]
    # without the option the planned end is the end
    fixed = KafkaReader(parse_options({"kafka.bootstrap.servers": kafka_bootstrap,
                                       "subscribe": topic}))
    assert [(s.partition, s.end, s.to_latest) for s in fixed.partitions()] == [
        (0, 6, False), (1, 1, False)]

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": ["null", "double"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
    ],
}
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "region", "type": "string", "default": "eu"}],
}


def test_avro_values_decode_through_the_registry_with_the_latest_schema(
    spark: Any, kafka_bootstrap: str, schema_registry: str
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = create_topic(kafka_bootstrap, 1)
    client = SchemaRegistryClient({"url": schema_registry})
    context = SerializationContext(topic, MessageField.VALUE)
    old = AvroSerializer(client, json.dumps(ORDER_V1))
    new = AvroSerializer(client, json.dumps(ORDER_V2))
    values = [
        old({"id": 1, "amount": 9.5, "tags": ["a"], "state": "NEW"}, context),
        old({"id": 2, "amount": None, "tags": [], "state": "PAID"}, context),
        new({"id": 3, "amount": 1.0, "tags": ["b", "c"], "state": "NEW", "region": "us"}, context),
    ]
    produce(kafka_bootstrap, topic, [(0, b"k", v, None) for v in values])
    df = (
        spark.read.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry)
        .load()
    )
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,amount:double,tags:array<string>,state:string,region:string>"
    )
    rows = df.orderBy("offset").select("key", "offset", "value.*").collect()
    assert [(bytes(r.key), r.offset) for r in rows] == [(b"k", 0), (b"k", 1), (b"k", 2)]
    assert [tuple(r)[2:] for r in rows] == [
        (1, 9.5, ["a"], "NEW", "eu"),
        (2, None, [], "PAID", "eu"),
        (3, 1.0, ["b", "c"], "NEW", "us"),
    ]


def test_from_avro_decodes_a_stream_by_subject(
    spark: Any, kafka_bootstrap: str, schema_registry: str, tmp_path: Path
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from sparkkafka.avro_columns import from_avro

    topic = create_topic(kafka_bootstrap, 1)
    client = SchemaRegistryClient({"url": schema_registry})
    context = SerializationContext(topic, MessageField.VALUE)
    old = AvroSerializer(client, json.dumps(ORDER_V1))
    new = AvroSerializer(client, json.dumps(ORDER_V2))
    values = [
        old({"id": 1, "amount": 9.5, "tags": ["a"], "state": "NEW"}, context),
        new({"id": 2, "amount": None, "tags": [], "state": "PAID", "region": "us"}, context),
    ]
    produce(kafka_bootstrap, topic, [(0, None, v, None) for v in values])
    query = (
        spark.readStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .load()
        .select("offset", from_avro("value", f"{topic}-value", schema_registry).alias("order"))
        .writeStream.format("memory")
        .queryName("orders_avro")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    rows = spark.sql("SELECT order.* FROM orders_avro ORDER BY offset").collect()
    assert [tuple(r) for r in rows] == [
        (1, 9.5, ["a"], "NEW", "eu"),
        (2, None, [], "PAID", "us"),
    ]


def test_a_value_that_is_not_wire_format_fails_naming_the_record(
    spark: Any, kafka_bootstrap: str, schema_registry: str
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = create_topic(kafka_bootstrap, 1)
    serializer = AvroSerializer(SchemaRegistryClient({"url": schema_registry}), '"string"')
    good = serializer("fine", SerializationContext(topic, MessageField.VALUE))
    produce(kafka_bootstrap, topic, [(0, None, good, None), (0, None, b"plain text", None)])
    df = (
        spark.read.format("millrace-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry)
        .load()
    )
    with pytest.raises(Exception, match=rf"{topic}-0 offset 1: not the Confluent wire format"):
        df.collect()
