"""Replication between two clusters: MirrorSourceConnector on a Connect worker against a
plain confluent-kafka consume-produce loop, in the same run.

Starts two built-in brokers (A and B) and one Connect worker on B (the target, as in Kafka),
then, in alternating rounds:
- throughput: N records (100-byte values, keys, a header) already in a 3-partition topic on
  A are copied to B, by a MirrorSourceConnector (one task, offset syncs on) into
  `A.<topic>`, or by a plain loop (one consumer assigned to the partitions, one idempotent
  acks=all producer, linger.ms 5, keeping partition, key, value, headers and timestamp);
  records/s from the first record on B to the last;
- end-to-end lag: a producer writes `--rate` records/s to a topic on A for `--seconds`,
  both the connector and the plain loop copy it to B at the same time, and a consumer on B
  measures, per record, its arrival minus the timestamp it was produced with (MirrorMaker
  keeps it): p50, p99 and max of each.
Ratios are connector / plain loop (records/s; for lag, plain / connector, so above 1 means
the connector is faster).

    .venv/bin/python bench/mirror_bench.py [--records 200000] [--rounds 3] [--rate 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokerproc import BrokerProcess
from tests.connect.workers import WorkerProcess, wait_for

VALUE = b"v" * 100
PARTITIONS = 3


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, str(i).encode(), partition=i % PARTITIONS,
                                 headers=[("n", b"1")])
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)


def total(consumer: Consumer, topic: str) -> int:
    try:  # a topic just created may have no leader yet: nothing arrived then
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in parts)
    except (KeyError, KafkaException):
        return 0


def time_arrival(bootstrap: str, topic: str, count: int) -> float:
    """Records/s on `topic`, from its first record's arrival until it holds `count`."""
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": "watch"})
    while total(watcher, topic) == 0:
        time.sleep(0.005)
    started = time.perf_counter()
    while total(watcher, topic) < count:
        time.sleep(0.01)
    elapsed = time.perf_counter() - started
    watcher.close()
    return count / elapsed


def plain_loop(a: str, b: str, topic: str, target: str, stop: threading.Event,
               count: int | None = None) -> None:
    consumer = Consumer({"bootstrap.servers": a, "group.id": f"plain-{uuid.uuid4()}",
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 20})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    producer = Producer({"bootstrap.servers": b, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": True})
    copied = 0
    while not stop.is_set() and (count is None or copied < count):
        for msg in consumer.consume(1000, 0.2):
            if msg.error() is not None:
                continue
            while True:
                try:
                    producer.produce(target, msg.value(), msg.key(), partition=msg.partition(),
                                     timestamp=msg.timestamp()[1], headers=msg.headers())
                    break
                except BufferError:
                    producer.poll(0.01)
            copied += 1
        producer.poll(0)
    producer.flush(60)
    consumer.close()


def create(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        future.result(30)


def mirror(worker: WorkerProcess, name: str, a: str, b: str, topics: str) -> None:
    answer = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "MirrorSourceConnector", "source.cluster.alias": "A",
        "target.cluster.alias": "B", "source.cluster.bootstrap.servers": a,
        "target.cluster.bootstrap.servers": b, "topics": topics, "tasks.max": "1",
        "replication.factor": "1", "offset-syncs.topic.replication.factor": "1"}})
    assert answer.status_code == 201, answer.text


def throughput_round(a: str, b: str, worker: WorkerProcess, records: int) -> tuple[float, float]:
    run = uuid.uuid4().hex[:6]
    source = f"tput-{run}"
    create(a, source)
    create(b, f"plain-{run}")
    produce(a, source, records)
    mirror(worker, f"tput-{run}", a, b, source)
    connector = time_arrival(b, f"A.{source}", records)
    worker.request("DELETE", f"/connectors/tput-{run}")
    stop = threading.Event()
    loop = threading.Thread(target=plain_loop, args=(a, b, source, f"plain-{run}", stop,
                                                     records))
    loop.start()
    plain = time_arrival(b, f"plain-{run}", records)
    loop.join()
    return connector, plain


def lags(b: str, topic: str, count: int, out: list[float]) -> None:
    consumer = Consumer({"bootstrap.servers": b, "group.id": f"lag-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 120
    while len(out) < count and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.2):
            if msg.error() is None:
                out.append(time.time() * 1000 - msg.timestamp()[1])
    consumer.close()


def lag_round(a: str, b: str, worker: WorkerProcess, rate: int, seconds: float
              ) -> tuple[list[float], list[float]]:
    run = uuid.uuid4().hex[:6]
    source = f"lag-{run}"
    create(a, source)
    create(b, f"plain-lag-{run}")
    mirror(worker, f"lag-{run}", a, b, source)
    wait_for(lambda: f"A.{source}" in AdminClient({"bootstrap.servers": b}).list_topics(
        timeout=10).topics, 60)
    count = int(rate * seconds)
    stop = threading.Event()
    loop = threading.Thread(target=plain_loop, args=(a, b, source, f"plain-lag-{run}", stop))
    loop.start()
    mirrored: list[float] = []
    plain: list[float] = []
    readers = [threading.Thread(target=lags, args=(b, f"A.{source}", count, mirrored)),
               threading.Thread(target=lags, args=(b, f"plain-lag-{run}", count, plain))]
    for reader in readers:
        reader.start()
    producer = Producer({"bootstrap.servers": a, "linger.ms": 0, "acks": "all"})
    started = time.monotonic()
    for i in range(count):
        time.sleep(max(0.0, started + i / rate - time.monotonic()))
        producer.produce(source, VALUE, partition=i % PARTITIONS)
        producer.poll(0)
    producer.flush(30)
    for reader in readers:
        reader.join()
    stop.set()
    loop.join()
    worker.request("DELETE", f"/connectors/lag-{run}")
    return mirrored, plain


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cluster_a, cluster_b = BrokerProcess(root / "a").start(), BrokerProcess(root / "b").start()
        worker = WorkerProcess(root / "w", cluster_b.bootstrap, "mirror-bench",
                               {"offset.flush.interval.ms": "60000",
                                "session.timeout.ms": "10000",
                                "heartbeat.interval.ms": "3000"}).start()
        a, b = cluster_a.bootstrap, cluster_b.bootstrap
        try:
            ratios = []
            print(f"throughput, {args.records} records of {len(VALUE)} bytes, records/s:")
            for r in range(args.rounds):
                connector, plain = throughput_round(a, b, worker, args.records)
                ratios.append(connector / plain)
                print(f"  round {r + 1}: connector {connector:,.0f}  plain loop {plain:,.0f}  "
                      f"ratio {connector / plain:.2f}")
            print(f"  median ratio {statistics.median(ratios):.2f}")
            print(f"end-to-end lag at {args.rate} records/s for {args.seconds:.0f} s, ms:")
            for r in range(args.rounds):
                by_mirror, by_loop = lag_round(a, b, worker, args.rate, args.seconds)
                print(f"  round {r + 1}: connector p50 {pct(by_mirror, .5):.1f} "
                      f"p99 {pct(by_mirror, .99):.1f} max {max(by_mirror, default=0):.1f}  |  "
                      f"plain p50 {pct(by_loop, .5):.1f} p99 {pct(by_loop, .99):.1f} "
                      f"max {max(by_loop, default=0):.1f}  |  p50 ratio "
                      f"{pct(by_loop, .5) / pct(by_mirror, .5):.2f}")
        finally:
            worker.stop()
            cluster_a.stop()
            cluster_b.stop()


if __name__ == "__main__":
    main()
