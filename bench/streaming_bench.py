"""Structured Streaming through the millrace-kafka Data Source, side by side in one run.

On one built-in broker and Spark ``local[2]``, over one topic of ``--messages`` 100-byte
records in ``--partitions`` partitions, every query a ``Trigger.AvailableNow`` run on a fresh
checkpoint, cut into batches of ``--per-trigger`` records:

  read:  readStream → Spark's ``noop`` sink, against a plain confluent-kafka consumer loop
         reading the same records (goal: ratio >= 0.8);
  sink:  readStream → ``writeStream.format("millrace-kafka")`` into a new topic, exactly-once
         (a transaction per task per batch) against at-least-once (idempotent producer).

Rounds are interleaved and each figure is the median; the machine is noisy, so compare the
ratios of one run. Spark's times include each query's start (planning, Python workers).

    .venv/bin/python bench/streaming_bench.py [--messages 200000] [--partitions 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.lag_summary_bench import consumer_loop, fill_topic
from tests.brokerproc import BrokerProcess

BATCHES: dict[Path, float] = {}  # checkpoint -> seconds inside micro-batches (Spark's progress)


def stream_query(
    spark: Any, bootstrap: str, topic: str, per_trigger: int, checkpoint: Path, sink: dict[str, str]
) -> float:
    """Seconds for an AvailableNow query from the topic's start into ``sink`` to finish; the
    seconds its micro-batches took (without the query's start) go to BATCHES."""
    started = time.perf_counter()
    writer = (
        spark.readStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .load()
        .selectExpr("key", "value")
        .writeStream.option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    for key, value in sink.items():
        writer = writer.format(value) if key == "format" else writer.option(key, value)
    query = writer.start()
    query.awaitTermination()
    if query.exception():
        raise RuntimeError(str(query.exception()))
    elapsed = time.perf_counter() - started
    BATCHES[checkpoint] = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress)
    BATCHES[checkpoint] /= 1000
    return elapsed


def new_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-out-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-trigger", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from laganalysis.session import configure
    from sparkkafka.datasource import register

    spark = configure(SparkSession.builder, "local[2]", "streaming-bench").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        bs = broker.bootstrap
        try:
            topic = fill_topic(bs, args.messages, args.partitions)
            n = [0]

            def checkpoint() -> Path:
                n[0] += 1
                return Path(tmp) / f"ckpt-{n[0]}"

            def sink(guarantee: str) -> dict[str, str]:
                out = new_topic(bs, args.partitions)
                return {
                    "format": "millrace-kafka",
                    "kafka.bootstrap.servers": bs,
                    "topic": out,
                    "deliveryGuarantee": guarantee,
                }

            def loop() -> float:
                seconds, count = consumer_loop(bs, topic, args.partitions, args.messages)
                assert count == args.messages
                return seconds

            cases: dict[str, Callable[[], float]] = {
                "consumer loop": loop,
                "readStream -> noop": lambda: stream_query(
                    spark, bs, topic, args.per_trigger, checkpoint(), {"format": "noop"}
                ),
                "-> sink at-least-once": lambda: stream_query(
                    spark, bs, topic, args.per_trigger, checkpoint(), sink("at-least-once")
                ),
                "-> sink exactly-once": lambda: stream_query(
                    spark, bs, topic, args.per_trigger, checkpoint(), sink("exactly-once")
                ),
            }
            for case in cases.values():  # warm: page cache, JVM code paths, Python workers
                case()
            BATCHES.clear()
            times: dict[str, list[float]] = {name: [] for name in cases}
            in_batches: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, case in cases.items():
                    times[name].append(case())
                    batch_s = BATCHES.pop(Path(tmp) / f"ckpt-{n[0]}", times[name][-1])
                    in_batches[name].append(batch_s)
        finally:
            broker.stop()
    spark.stop()
    median = {name: statistics.median(ts) for name, ts in times.items()}
    batches = {name: statistics.median(ts) for name, ts in in_batches.items()}
    print(
        f"{args.messages:,} x 100 B in {args.partitions} partitions, batches of "
        f"{args.per_trigger:,}, median of {args.rounds} interleaved rounds"
    )
    print(f"  {'':<24} {'whole query':>22} {'micro-batches only':>24}")
    for name, seconds in median.items():
        inside = batches[name]
        print(
            f"  {name:<24} {args.messages / seconds:>10,.0f} msg/s ({seconds:5.2f} s)"
            f" {args.messages / inside:>10,.0f} msg/s ({inside:5.2f} s)"
        )
    loop_s = median["consumer loop"]
    for label, table in (("whole query", median), ("micro-batches only", batches)):
        read_s, alo_s = table["readStream -> noop"], table["-> sink at-least-once"]
        eos_s = table["-> sink exactly-once"]
        print(
            f"  {label}: streaming read / consumer loop {loop_s / read_s:.2f} (goal >= 0.8),"
            f" exactly-once / at-least-once sink {alo_s / eos_s:.2f}"
        )


if __name__ == "__main__":
    main()
