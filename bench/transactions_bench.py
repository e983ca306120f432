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
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokerproc import BrokerProcess

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "broker").start()
        try:
            run(broker.bootstrap, args.records, args.rounds)
        finally:
            broker.stop()


def run(bootstrap: str, records: int, rounds: int) -> None:
    rates: dict[str, list[float]] = {}
    read_topic = new_topic(bootstrap)
    transactional(bootstrap, records, 100, abort_every=10, topic=read_topic)
    expected = {"read_uncommitted": records, "read_committed": records - records // 10}
    for _ in range(rounds):
        cases: dict[str, Callable[[], float]] = {
            "produce idempotent": lambda: idempotent(bootstrap, records),
            "produce txn x100": lambda: transactional(bootstrap, records, 100),
            "produce txn x1000": lambda: transactional(bootstrap, records, 1000),
        }
        for name, case in cases.items():
            rates.setdefault(name, []).append(case())
        for isolation, count in expected.items():
            rates.setdefault(f"consume {isolation}", []).append(
                consume(bootstrap, read_topic, isolation, count))
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"{records} records of {len(VALUE)} B, median of {rounds} rounds")
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
