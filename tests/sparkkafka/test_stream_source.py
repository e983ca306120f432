"""``readStream.format("millrace-kafka")`` against the built-in broker: admission control under
Trigger.AvailableNow, restarts from the checkpoint, topics joining a pattern, data loss."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.sparkkafka.topics import create_topic, produce


def stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("millrace-kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df: Any, checkpoint: Path, out: Path) -> list[int]:
    """Run the query to what is there now, into Parquet (Spark's exactly-once file sink);
    the rows each micro-batch took."""
    query = (
        df.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def values(spark: Any, out: Path) -> list[str]:
    return sorted((r.value for r in spark.read.parquet(str(out)).collect()), key=int)


def test_max_offsets_per_trigger_cuts_available_now_into_batches(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = create_topic(kafka_bootstrap, 3)
    produce(kafka_bootstrap, topic, [(i % 3, None, str(i).encode(), None) for i in range(100)])
    df = stream(spark, kafka_bootstrap, subscribe=topic, maxOffsetsPerTrigger="30")
    batches = run_available_now(df, tmp_path / "ckpt", tmp_path / "out")
    assert batches == [30, 30, 30, 10]
    assert values(spark, tmp_path / "out") == [str(i) for i in range(100)]


def test_a_restarted_query_reads_only_what_is_new(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, [(i % 2, None, str(i).encode(), None) for i in range(40)])
    df = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets="earliest")
    assert sum(run_available_now(df, tmp_path / "ckpt", tmp_path / "out")) == 40
    produce(kafka_bootstrap, topic, [(i % 2, None, str(i).encode(), None) for i in range(40, 70)])
    # startingOffsets only applies to a new query: "latest" here must not skip the new records.
    df = stream(spark, kafka_bootstrap, subscribe=topic, startingOffsets="latest")
    assert sum(run_available_now(df, tmp_path / "ckpt", tmp_path / "out")) == 30
    assert values(spark, tmp_path / "out") == [str(i) for i in range(70)]


def test_starting_offsets_json_assign_and_headers(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    produce(
        kafka_bootstrap,
        topic,
        [(i % 2, None, str(i).encode(), None) for i in range(20)],
        headers=[("h", b"1")],
    )
    df = stream(
        spark,
        kafka_bootstrap,
        assign=json.dumps({topic: [1]}),
        startingOffsets=json.dumps({topic: {"1": 7}}),
        includeHeaders="true",
    )
    query = (
        df.selectExpr("offset", "CAST(value AS STRING) AS value", "headers")
        .writeStream.format("memory")
        .queryName("assigned")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    rows = spark.sql("SELECT * FROM assigned ORDER BY offset").collect()
    assert [(r.offset, r.value) for r in rows] == [(o, str(2 * o + 1)) for o in range(7, 10)]
    assert {(h.key, bytes(h.value)) for r in rows for h in r.headers} == {("h", b"1")}


def test_a_new_query_starts_at_a_timestamp(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = create_topic(kafka_bootstrap, 2)
    # A minute ago, whole seconds: records older than the topic's retention.ms (7 days)
    # would be deleted by the broker's next retention check, which on the long-lived
    # session broker can fall between the produce and the read.
    base = (int(time.time()) - 60) * 1000
    records = [(i % 2, None, str(i).encode(), base + i * 1000) for i in range(20)]
    produce(kafka_bootstrap, topic, records)
    df = stream(spark, kafka_bootstrap, subscribe=topic, startingTimestamp=str(base + 12_000))
    query = (
        df.selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("memory")
        .queryName("from_timestamp")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    got = sorted(int(r.value) for r in spark.sql("SELECT * FROM from_timestamp").collect())
    assert got == list(range(12, 20))


def wait_for(check: Callable[[], bool], what: str, seconds: float = 60,
             query: Any = None) -> None:
    """Waits for `check`; a failure says what the running `query` last reported (its
    exception if it stopped, its status and last progress if not)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            state = "" if query is None else (
                f"; the query: active={query.isActive}, exception={query.exception()}, "
                f"status={query.status}, last progress={query.lastProgress}")
            pytest.fail(f"gave up waiting for {what}{state}")
        time.sleep(0.3)


def test_a_topic_created_under_the_pattern_joins_the_running_query(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:8]}"
    first = create_topic(kafka_bootstrap, 1, f"{prefix}-a")
    produce(kafka_bootstrap, first, [(0, None, b"a0", None)])
    df = stream(spark, kafka_bootstrap, subscribePattern=f"{prefix}-.*")
    query = (
        df.selectExpr("topic", "CAST(value AS STRING) AS value")
        .writeStream.format("memory")
        .queryName("pattern")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:

        def seen() -> set[tuple[str, str]]:
            return {(r.topic, r.value) for r in spark.sql("SELECT * FROM pattern").collect()}

        wait_for(lambda: (first, "a0") in seen(), "the first topic's record", query=query)
        second = create_topic(kafka_bootstrap, 2, f"{prefix}-b")
        produce(kafka_bootstrap, second, [(0, None, b"b0", None), (1, None, b"b1", None)])
        wait_for(lambda: len(seen()) == 3, "the new topic's records", query=query)
        assert seen() == {(first, "a0"), (second, "b0"), (second, "b1")}
    finally:
        query.stop()


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_records_deleted_before_they_were_read(
    spark: Any, kafka_bootstrap: str, tmp_path: Path, fail_on_data_loss: str
) -> None:
    topic = create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, None, str(i).encode(), None) for i in range(10)])
    df = stream(spark, kafka_bootstrap, subscribe=topic)
    assert sum(run_available_now(df, tmp_path / "ckpt", tmp_path / "out")) == 10
    produce(kafka_bootstrap, topic, [(0, None, str(i).encode(), None) for i in range(10, 20)])
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 15)])[TopicPartition(topic, 0, 15)].result()
    df = stream(spark, kafka_bootstrap, subscribe=topic, failOnDataLoss=fail_on_data_loss)
    if fail_on_data_loss == "true":
        with pytest.raises(Exception, match=r"offsets 10 to 14 were deleted.*failOnDataLoss"):
            run_available_now(df, tmp_path / "ckpt", tmp_path / "out")
    else:
        assert sum(run_available_now(df, tmp_path / "ckpt", tmp_path / "out")) == 5
        assert values(spark, tmp_path / "out") == [str(i) for i in [*range(10), *range(15, 20)]]
