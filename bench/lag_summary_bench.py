"""Lag analytics side by side: the lag-summary job on Spark local[2] against the same computation
in pandas in one process, over 1M and 10M generated history rows; and the millrace-kafka Data
Source's read throughput against a plain confluent-kafka consumer loop over the same topic.

    .venv/bin/python bench/lag_summary_bench.py [--rows 1000000 10000000] [--messages 500000]
        [--baseline DIR] [--rounds 1] [--no-source]

Both sides of each pair read the same input in the same run (history from one Parquet file,
records from one topic on a built-in broker); the ratios are what to compare. Each round's
times are printed with the CPU each side used: the JVM's and its Python workers' (from /proc,
reaped workers included) for Spark, ``process_time`` for pandas. Before the timed
rounds, each Spark summary's rows are checked against pandas' result (every column, 1e-9).
``--baseline DIR`` also times the lag summary of an older source tree (``git worktree add DIR
REV`` or an export of ``git archive REV``: its ``laganalysis/jobs/lag_summary.py`` is loaded
beside this one, in the same Spark session), alternating with this tree's and pandas' in every
round.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from laganalysis.burrow import Status
from tests.brokerproc import BrokerProcess

SERIES = 1000  # 50 groups x 2 topics x 10 partitions
STATUSES = [s.name for s in Status if s is not Status.NOTFOUND]


def generate_history(rows: int, path: Path) -> None:
    """``rows`` samples, 5 s apart, spread evenly over SERIES partitions, as one Parquet file."""
    rng = np.random.default_rng(7)
    series = np.arange(rows) % SERIES
    step = np.arange(rows) // SERIES
    lag = rng.integers(0, 100_000, rows)
    end = step * 50 + 100_000
    table = pa.table(
        {
            "group": pa.array([f"g{s // 20}" for s in range(SERIES)]).take(pa.array(series)),
            "topic": pa.array([f"t{(s // 10) % 2}" for s in range(SERIES)]).take(pa.array(series)),
            "partition": (series % 10).astype(np.int32),
            "ts": 1_700_000_000.0 + step * 5.0,
            "committed_offset": end - lag,
            "end_offset": end,
            "lag": lag,
            "lag_seconds": lag / 50.0,
            "status": pa.array(STATUSES).take(pa.array(rng.integers(0, len(STATUSES), rows))),
        }
    )
    pq.write_table(table, path)


def load_summarize(tree: Path | None) -> Any:
    """``summarize`` of this tree, or of the lag-summary module of an older tree."""
    if tree is None:
        from laganalysis.jobs.lag_summary import summarize

        return summarize
    spec = importlib.util.spec_from_file_location(
        "baseline_lag_summary", tree / "laganalysis" / "jobs" / "lag_summary.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.summarize


def spark_cpu(jvm_pid: int) -> tuple[float, float]:
    """CPU seconds so far of the JVM, and of its Python workers: the processes under it
    (living, and what they and the JVM reaped)."""
    children: dict[int, list[int]] = {}
    times: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        times[int(entry.name)] = [int(f) for f in fields[11:15]]  # utime stime cutime cstime
    tick = os.sysconf("SC_CLK_TCK")
    jvm = times[jvm_pid]
    workers = jvm[2] + jvm[3]
    stack = list(children.get(jvm_pid, []))
    while stack:
        pid = stack.pop()
        workers += sum(times.get(pid, [0]))
        stack += children.get(pid, [])
    return (jvm[0] + jvm[1]) / tick, workers / tick


def spark_summary(spark: Any, path: Path, summarize: Any) -> tuple[float, float, list[Any]]:
    """Wall and CPU (JVM and Python workers) seconds of one summary, and its rows."""
    jvm_pid = spark.sparkContext._gateway.proc.pid
    cpu = sum(spark_cpu(jvm_pid))
    started = time.perf_counter()
    rows = summarize(spark.read.parquet(str(path))).collect()
    took = time.perf_counter() - started
    return took, sum(spark_cpu(jvm_pid)) - cpu, rows


def check_equal(spark_rows: list[Any], result: pd.DataFrame) -> None:
    """Spark's summary is pandas' to 1e-9 (relative) in every column; a status pandas never
    saw is a missing pivot column there and 0.0 seconds in Spark's."""
    assert len(spark_rows) == len(result), (len(spark_rows), len(result))
    for row in spark_rows:
        want = result.loc[(row["group"], row["topic"], row["partition"])]
        for column, value in row.asDict().items():
            if column in ("group", "topic", "partition"):
                continue
            expected = float(want.get(column, 0.0))
            expected = 0.0 if np.isnan(expected) and column.startswith("seconds_") else expected
            assert np.isclose(value, expected, rtol=1e-9, atol=1e-9), (row, column, expected)


def pandas_summary(path: Path) -> tuple[float, float, pd.DataFrame]:
    """Wall and CPU seconds of the summary in pandas, and its result."""
    started, cpu = time.perf_counter(), time.process_time()
    df = pd.read_parquet(path)
    key = ["group", "topic", "partition"]
    df = df.sort_values([*key, "ts"])
    df["held_s"] = (df.groupby(key)["ts"].shift(-1) - df["ts"]).fillna(0.0)
    grouped = df.groupby(key)
    stats = grouped.agg(
        samples=("lag", "size"),
        lag_min=("lag", "min"),
        lag_avg=("lag", "mean"),
        lag_p95=("lag", lambda s: s.quantile(0.95)),
        lag_max=("lag", "max"),
        lag_seconds_min=("lag_seconds", "min"),
        lag_seconds_avg=("lag_seconds", "mean"),
        lag_seconds_p95=("lag_seconds", lambda s: s.quantile(0.95)),
        lag_seconds_max=("lag_seconds", "max"),
    )
    held = df.pivot_table(index=key, columns="status", values="held_s", aggfunc="sum")
    result = stats.join(held.add_prefix("seconds_"))
    return time.perf_counter() - started, time.process_time() - cpu, result


def fill_topic(bootstrap: str, messages: int, partitions: int) -> str:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20})
    value = b"x" * 100
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value, str(i % 1000).encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0
    return topic


def spark_read(spark: Any, bootstrap: str, topic: str) -> tuple[float, int]:
    from pyspark.sql import functions as F

    started = time.perf_counter()
    df = (
        spark.read.format("millrace-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    total = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("b")).first()
    return time.perf_counter() - started, int(total.n)


def consumer_loop(bootstrap: str, topic: str, partitions: int, messages: int) -> tuple[float, int]:
    started = time.perf_counter()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count = size = 0
    while count < messages:
        for m in consumer.consume(num_messages=10_000, timeout=1):
            count += 1
            size += len(m.value())
    consumer.close()
    return time.perf_counter() - started, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="an older source tree whose lag summary runs beside this one",
    )
    parser.add_argument("--rounds", type=int, default=1, help="timed rounds per size (median)")
    parser.add_argument("--no-source", action="store_true", help="skip the Data Source read")
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from laganalysis.session import configure
    from sparkkafka.datasource import register

    builder = configure(SparkSession.builder, "local[2]", "lag-bench")
    spark = builder.config("spark.driver.memory", "4g").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    sides = {"spark": load_summarize(None)}
    if args.baseline:
        sides["baseline"] = load_summarize(args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        print("lag summary (local[2] vs pandas, same Parquet input; median of rounds)")
        head = f"{'rows':>12} {'spark s':>9} {'pandas s':>9} {'pandas/spark':>13}"
        if args.baseline:
            head += f" {'baseline s':>11} {'pandas/baseline':>16}"
        print(head)
        for rows in args.rows:
            path = Path(tmp) / f"history-{rows}.parquet"
            generate_history(rows, path)
            # One untimed run each (the JVM's code paths warmed), checked against pandas'.
            expected = pandas_summary(path)[2]
            for summarize in sides.values():
                check_equal(spark_summary(spark, path, summarize)[2], expected)
            times: dict[str, list[float]] = {name: [] for name in (*sides, "pandas")}
            cpus: dict[str, list[float]] = {name: [] for name in times}
            for i in range(args.rounds):
                order = list(sides) if i % 2 == 0 else list(sides)[::-1]
                report = []
                for name in order:
                    took, cpu, got = spark_summary(spark, path, sides[name])
                    assert len(got) == SERIES, (name, len(got))
                    times[name].append(took)
                    cpus[name].append(cpu)
                    report.append(f"{name} {took:.2f} s (CPU {cpu:.2f} s)")
                took, cpu, result = pandas_summary(path)
                assert len(result) == SERIES, len(result)
                times["pandas"].append(took)
                cpus["pandas"].append(cpu)
                report.append(f"pandas {took:.2f} s (CPU {cpu:.2f} s)")
                load = os.getloadavg()[0]
                print(f"  {rows:,} round {i + 1}: {', '.join(report)}; load {load:.1f}", flush=True)
            med = {name: float(np.median(t)) for name, t in times.items()}
            line = f"{rows:>12,} {med['spark']:>9.2f} {med['pandas']:>9.2f}"
            line += f" {med['pandas'] / med['spark']:>13.2f}"
            if args.baseline:
                line += f" {med['baseline']:>11.2f} {med['pandas'] / med['baseline']:>16.2f}"
            print(line, flush=True)
            cpu_line = ", ".join(f"{name} {np.median(c):.2f} s" for name, c in cpus.items())
            print(f"  {rows:,} median CPU: {cpu_line}", flush=True)
        if args.no_source:
            spark.stop()
            return
        broker = BrokerProcess(Path(tmp) / "broker").start()
        try:
            topic = fill_topic(broker.bootstrap, args.messages, args.partitions)
            # One untimed read each first: page cache, JVM code paths, Python workers.
            consumer_loop(broker.bootstrap, topic, args.partitions, args.messages)
            spark_read(spark, broker.bootstrap, topic)
            c_time, c_count = consumer_loop(broker.bootstrap, topic, args.partitions, args.messages)
            s_time, s_count = spark_read(spark, broker.bootstrap, topic)
            assert c_count == s_count == args.messages, (c_count, s_count)
            print(f"\nData Source read, {args.messages:,} x 100 B in {args.partitions} partitions")
            print(f"  confluent-kafka loop: {c_count / c_time:>10,.0f} msg/s ({c_time:.2f} s)")
            print(f"  millrace-kafka local[2]: {s_count / s_time:>7,.0f} msg/s ({s_time:.2f} s)")
            print(f"  source/loop ratio: {c_time / s_time:.2f}")
        finally:
            broker.stop()
    spark.stop()


if __name__ == "__main__":
    main()
