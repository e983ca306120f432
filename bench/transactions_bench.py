"""Transactional produce and read_committed consume on the built-in broker, side by side with
their non-transactional counterparts in the same run.

With librdkafka and 1 KiB values on one broker (a fresh log dir):
  produce: idempotent (enable.idempotence) against transactions of 100 and of 1,000 records
           (begin, produce, commit, one after another), the same number of records;
  consume: one partition written by transactions of 100 records, a tenth of them aborted,
           read to its end with isolation.level=read_uncommitted and read_committed.
Rounds are interleaved; it prints the median records/s of each and the ratios. The machine
is noisy: compare the ratios from one run, not absolute numbers across runs.

    .venv/bin/python bench/transactions_bench.py [--records 20000] [--rounds 3]

With `--before DIR` (an older source tree, e.g. `git archive 1829935 | tar -x -C DIR`) it
runs a broker from each tree and measures them in alternating rounds (`trees.py`), then
prints each case's after/before ratio as well.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import trees
from brokercluster.ports import free_port

VALUE = b"x" * 1024


def new_topic(bootstrap: str) -> str:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.create_topics([NewTopic(topic, 1, 1)]).values()
    future.result(30)
    return topic


def _produce_all(producer: confluent_kafka.Producer, topic: str, count: int) -> None:
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.001)


def idempotent(bootstrap: str, records: int) -> float:
    topic = new_topic(bootstrap)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                         "enable.idempotence": True})
    start = time.perf_counter()
    _produce_all(producer, topic, records)
    assert producer.flush(120) == 0
    return records / (time.perf_counter() - start)


def transactional(bootstrap: str, records: int, per_txn: int, abort_every: int = 0,
                  topic: str | None = None) -> float:
    topic = topic or new_topic(bootstrap)
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5,
        "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    start = time.perf_counter()
    for n in range(records // per_txn):
        producer.begin_transaction()
        _produce_all(producer, topic, per_txn)
        if abort_every and n % abort_every == abort_every - 1:
            producer.flush(60)
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
    return records / (time.perf_counter() - start)


def consume(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    """Records/s reading the `expected` records this isolation level sees in the partition."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": isolation,
    })
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got, start = 0, time.perf_counter()
    while got < expected:
        batch = consumer.consume(min(10_000, expected - got), timeout=5)
        if not batch:
            raise RuntimeError(f"{isolation} consumer stalled at {got} of {expected}")
        got += sum(1 for m in batch if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    assert got == expected, f"{isolation}: read {got}, expected {expected}"
    return got / elapsed


def start_broker(tree: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A lone broker from `tree`, configured as tests/brokerproc.py configures one."""
    port = free_port()
    data.mkdir(parents=True)
    overrides = {"node.id": "1", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                 "log.dirs": str(data / "logs"), "group.initial.rebalance.delay.ms": "0",
                 "offsets.topic.num.partitions": "4",
                 "transaction.state.log.num.partitions": "4"}
    args = ["-m", "brokercore"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    return trees.start(tree, args, data / "broker.out", b"ready on", 60), f"127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a source tree of the code to compare to")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = {name: start_broker(tree, Path(tmp) / name)
                   for name, tree in trees.trees(args.before).items()}
        try:
            medians = run({name: bootstrap for name, (_, bootstrap) in started.items()},
                          args.records, args.rounds)
        finally:
            for proc, _ in started.values():
                trees.stop(proc)
    if "before" in medians:
        print("after / before")
        for case, rate in medians["after"].items():
            print(f"  {case:28} {rate / medians['before'][case]:10.2f}")


def run(bootstraps: dict[str, str], records: int, rounds: int) -> dict[str, dict[str, float]]:
    """Every case against each broker in turn, round after round; the medians by broker."""
    expected = {"read_uncommitted": records, "read_committed": records - records // 10}
    read_topics = {}
    for name, bootstrap in bootstraps.items():
        read_topics[name] = new_topic(bootstrap)
        transactional(bootstrap, records, 100, abort_every=10, topic=read_topics[name])
    rates: dict[str, dict[str, list[float]]] = {name: {} for name in bootstraps}
    for _ in range(rounds):
        for name, bootstrap in bootstraps.items():
            for case, rate in one_round(bootstrap, read_topics[name], records,
                                        expected).items():
                rates[name].setdefault(case, []).append(rate)
    medians = {name: {case: statistics.median(values) for case, values in by_case.items()}
               for name, by_case in rates.items()}
    for name, median in medians.items():
        print(f"{name}: {records} records of {len(VALUE)} B, median of {rounds} rounds")
        show(median, records, expected)
    return medians


def one_round(bootstrap: str, read_topic: str, records: int,
              expected: dict[str, int]) -> dict[str, float]:
    cases: dict[str, Callable[[], float]] = {
        "produce idempotent": lambda: idempotent(bootstrap, records),
        "produce txn x100": lambda: transactional(bootstrap, records, 100),
        "produce txn x1000": lambda: transactional(bootstrap, records, 1000),
    }
    for isolation, count in expected.items():
        cases[f"consume {isolation}"] = functools.partial(consume, bootstrap, read_topic,
                                                          isolation, count)
    return {case: measure() for case, measure in cases.items()}


def show(median: dict[str, float], records: int, expected: dict[str, int]) -> None:
    for name, rate in median.items():
        print(f"  {name:28} {rate:10,.0f} records/s")
    base = median["produce idempotent"]
    print(f"  txn x100 / idempotent       {median['produce txn x100'] / base:.2f}")
    print(f"  txn x1000 / idempotent      {median['produce txn x1000'] / base:.2f}")
    print(f"  read_committed / uncommitted "
          f"{median['consume read_committed'] / median['consume read_uncommitted']:.2f}"
          f"  (reading {expected['read_committed']} of {records} records)")


if __name__ == "__main__":
    main()
