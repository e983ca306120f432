"""End-to-end latency of a filter query at a steady rate, side by side in one run.

On one built-in broker and Spark ``local[2]``: a producer writes ``--rate`` records/s (each
value carries its send time) into a 2-partition topic; a query keeps the even sequence
numbers and writes them to an output topic; a read_committed consumer of the output takes
each record's latency as its arrival time minus its send time. Cases, one after the other
on fresh topics, each measured for ``--seconds`` after ``--warmup`` seconds:

  spark at-least-once:  readStream.format("millrace-kafka") → filter →
                        writeStream.format("millrace-kafka"), deliveryGuarantee=at-least-once,
                        Spark's default trigger (a micro-batch as soon as the last one ends)
  spark exactly-once:   the same query, a Kafka transaction per task per micro-batch
  consumer loop:        a plain confluent-kafka consume → filter → produce loop in one
                        process (the floor the Spark queries are compared with)

    .venv/bin/python bench/stream_latency_bench.py [--rate 1000] [--seconds 30] [--warmup 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokerproc import BrokerProcess

PARTITIONS = 2
# case -> the median milliseconds of each phase of the measured micro-batches (Spark's
# progress: latestOffset, queryPlanning, addBatch (the tasks), walCommit, commitOffsets...)
PHASES: dict[str, dict[str, float]] = {}
PHASE_NAMES = ("triggerExecution", "latestOffset", "queryPlanning", "addBatch", "walCommit",
               "commitOffsets")  # fmt: skip


def new_topic(bootstrap: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)
    return name


def produce_at_rate(bootstrap: str, topic: str, rate: int, stop: threading.Event) -> None:
    """``rate`` records/s, value ``<seq>,<send time ns>`` padded to 100 bytes."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    started, seq = time.perf_counter(), 0
    while not stop.is_set():
        due = started + seq / rate
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        value = f"{seq},{time.time_ns()},".ljust(100, "x").encode()
        producer.produce(topic, value, partition=seq % PARTITIONS)
        producer.poll(0)
        seq += 1
    producer.flush(30)


def collect(bootstrap: str, topic: str, stop: threading.Event, out: list[tuple[float, float]]
            ) -> None:  # fmt: skip
    """(arrival s, latency ms) of every output record, read_committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    while not stop.is_set():
        for m in consumer.consume(num_messages=1000, timeout=0.1):
            if m.error() is None:
                now = time.time_ns()
                sent = int(m.value().split(b",")[1])
                out.append((time.perf_counter(), (now - sent) / 1e6))
    consumer.close()


def spark_query(spark: Any, bootstrap: str, source: str, sink: str, guarantee: str,
                checkpoint: str, warmup: float) -> Callable[[], None]:  # fmt: skip
    query = (
        spark.readStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .where("CAST(split(v, ',')[0] AS BIGINT) % 2 = 0")
        .selectExpr("CAST(v AS BINARY) AS value")
        .writeStream.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.linger.ms", "1")
        .option("topic", sink)
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    # Measure the running query, not its start (JVM code paths, the planning Python process,
    # the first Python workers): wait for its first micro-batch, empty as it is.
    deadline = time.monotonic() + 300
    while query.lastProgress is None and time.monotonic() < deadline:
        time.sleep(0.2)

    def halt() -> None:
        began = time.time() - 1000  # progress timestamps are UTC ISO strings
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
        query.stop()
        began = min((_epoch(p["timestamp"]) for p in progress), default=began) + warmup
        kept = [p for p in progress if _epoch(p["timestamp"]) >= began] or progress
        phases = {
            name: statistics.median(p["durationMs"].get(name, 0) for p in kept)
            for name in PHASE_NAMES
        }
        phases["rows per batch"] = statistics.median(p["numInputRows"] for p in kept)
        phases["batches"] = len(kept)
        PHASES[guarantee] = phases

    return halt


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def consumer_loop(bootstrap: str, source: str, sink: str) -> Callable[[], None]:
    stop = threading.Event()

    def run() -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"loop-{uuid.uuid4()}",
             "enable.auto.commit": False, "fetch.wait.max.ms": 10}
        )  # fmt: skip
        consumer.assign([TopicPartition(source, p, 0) for p in range(PARTITIONS)])
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        while not stop.is_set():
            for m in consumer.consume(num_messages=1000, timeout=0.1):
                value = m.value()
                if m.error() is None and int(value.split(b",")[0]) % 2 == 0:
                    producer.produce(sink, value, partition=m.partition())
            producer.poll(0)
        producer.flush(30)
        consumer.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(30)

    return halt


def measure(bootstrap: str, rate: int, seconds: float, warmup: float,
            start: Callable[[str, str], Callable[[], None]]) -> list[float]:  # fmt: skip
    source, sink = new_topic(bootstrap, "lat-in"), new_topic(bootstrap, "lat-out")
    stop_query = start(source, sink)
    stop = threading.Event()
    arrivals: list[tuple[float, float]] = []
    threads = [
        threading.Thread(target=produce_at_rate, args=(bootstrap, source, rate, stop)),
        threading.Thread(target=collect, args=(bootstrap, sink, stop, arrivals)),
    ]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    time.sleep(warmup + seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    stop_query()
    return [lat for at, lat in arrivals if at - began >= warmup]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=10)
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from laganalysis.session import configure
    from sparkkafka.datasource import register

    spark = configure(SparkSession.builder, "local[2]", "latency-bench").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        bs = broker.bootstrap
        try:
            for guarantee in ("at-least-once", "exactly-once"):
                checkpoint = str(Path(tmp) / f"ckpt-{guarantee}")

                def query(src: str, out: str, g: str = guarantee, c: str = checkpoint
                          ) -> Callable[[], None]:  # fmt: skip
                    return spark_query(spark, bs, src, out, g, c, args.warmup)

                results[f"spark {guarantee}"] = measure(
                    bs, args.rate, args.seconds, args.warmup, query
                )
            results["consumer loop"] = measure(
                bs, args.rate, args.seconds, args.warmup,
                lambda src, out: consumer_loop(bs, src, out),
            )  # fmt: skip
        finally:
            broker.stop()
    spark.stop()
    print(
        f"filter query at {args.rate:,} records/s into {PARTITIONS} partitions (half kept), "
        f"{args.seconds:.0f} s after {args.warmup:.0f} s warm-up, latency send → read_committed"
    )
    floor = results["consumer loop"]
    floor_p50, floor_p99 = percentile(floor, 0.5), percentile(floor, 0.99)
    for name, lats in results.items():
        if not lats:
            print(f"  {name:<22} no records arrived")
            continue
        p50, p99 = percentile(lats, 0.5), percentile(lats, 0.99)
        print(
            f"  {name:<22} {len(lats):>7,} records  p50 {p50:8.1f} ms  p99 {p99:8.1f} ms  "
            f"mean {statistics.fmean(lats):8.1f} ms  (p50 {p50 / floor_p50:6.1f}x, "
            f"p99 {p99 / floor_p99:6.1f}x the loop)"
        )
    print("  micro-batches after the warm-up (medians; durations in ms, Spark's progress):")
    for guarantee, phases in PHASES.items():
        shown = ", ".join(f"{name} {value:,.0f}" for name, value in phases.items())
        print(f"    spark {guarantee}: {shown}")


if __name__ == "__main__":
    main()
