"""The Data Source's executor-side read without Spark, against a plain consumer loop.

``sparkkafka.source.read_slice`` is what one Spark task runs: a fresh consumer assigned at the
slice's start, ``consume`` in chunks, each chunk turned into one Arrow record batch. Timing it
in-process over one partition of ``--messages`` 100-byte records, against the same records
read by a bare confluent-kafka consume loop, separates the connector's own Python cost (the
Arrow batches) from Spark's (planning, scheduling, workers, the JVM side), which
``streaming_bench.py`` measures whole. Rounds are interleaved; medians.

    .venv/bin/python bench/source_slice_bench.py [--messages 200000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.lag_summary_bench import consumer_loop, fill_topic
from sparkkafka.options import parse_options
from sparkkafka.source import KafkaSlice, read_slice
from tests.brokerproc import BrokerProcess


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n = args.messages
    times: dict[str, list[float]] = {"read_slice (Arrow batches)": [], "consumer loop": []}
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        try:
            topic = fill_topic(broker.bootstrap, n, 1)
            opts = parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
            for _ in range(args.rounds):
                started = time.perf_counter()
                rows = sum(b.num_rows for b in read_slice(opts, KafkaSlice(topic, 0, 0, n)))
                times["read_slice (Arrow batches)"].append(time.perf_counter() - started)
                assert rows == n
                seconds, count = consumer_loop(broker.bootstrap, topic, 1, n)
                assert count == n
                times["consumer loop"].append(seconds)
        finally:
            broker.stop()
    median = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"{n:,} x 100 B, one partition, median of {args.rounds} interleaved rounds")
    for name, seconds in median.items():
        print(f"  {name:<28} {n / seconds:>10,.0f} records/s ({seconds:.2f} s)")
    ratio = median["consumer loop"] / median["read_slice (Arrow batches)"]
    print(f"  read_slice / consumer loop {ratio:.2f}")


if __name__ == "__main__":
    main()
