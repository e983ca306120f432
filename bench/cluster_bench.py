"""The cost of replication and the time to fail over, on one 3-broker cluster in one run.

Side by side, with the same librdkafka producer and values:
  (a) throughput (msg/s, MB/s) producing to an RF=3 topic with acks=all and
      min.insync.replicas=2, against an RF=1 topic (acks=all, which with one replica is the
      leader's append alone); the ratio is what replication costs;
  (b) produce latency p50/p99 at a steady, modest rate (one message in flight at a time,
      so the figure is the round trip, not queueing), RF=3 against RF=1;
  (c) failover: an idempotent producer writes to one RF=3 partition; its leader is killed
      with SIGKILL; the time from the kill to the first acknowledged produce on the new
      leader, repeated and summarised.
The brokers use the fault tests' short session (3 s) and lag (3 s) settings. The machine is
noisy: compare the ratios of one run, not absolute numbers across runs.

    .venv/bin/python bench/cluster_bench.py [--messages 50000] [--size 1024] [--failovers 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.broker_throughput import produce
from tests.brokerproc import ClusterProcess
from tests.cluster.faults import FAST_FAILOVER, TOPIC_CONFIGS, ClusterView
from tests.cluster.workload import create_topic


def latencies(bootstrap: str, topic: str, count: int, value: bytes) -> list[float]:
    """Round-trip seconds of `count` acks=all produces, one at a time."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "linger.ms": 0})
    producer.produce(topic, value=value, partition=0)
    producer.flush(30)
    out: list[float] = []
    done: list[float] = []

    def delivered(err: object, _msg: object) -> None:
        if err is None:
            done.append(time.perf_counter())

    for i in range(count):
        done.clear()
        start = time.perf_counter()
        producer.produce(topic, value=value, partition=i % 3, on_delivery=delivered)
        producer.flush(30)
        assert done, "a latency probe was not delivered"
        out.append(done[0] - start)
    return out


def failover(cluster: ClusterProcess, view: ClusterView, topic: str) -> float:
    """Seconds from SIGKILL of partition 0's leader to the first ack on its new leader.

    Only messages sent after the kill count: an ack read after it may carry the dead
    leader's answer, but a message sent after it can only be acked by the successor.
    """
    acked: list[tuple[float, float]] = []  # (sent, acked), monotonic
    stop = threading.Event()

    def produce() -> None:
        producer = confluent_kafka.Producer({
            "bootstrap.servers": cluster.bootstrap, "acks": "all",
            "enable.idempotence": True, "linger.ms": 0, "message.timeout.ms": 60_000,
            "topic.metadata.refresh.interval.ms": 1000,
        })

        def delivered(err: object, msg: confluent_kafka.Message) -> None:
            if err is None:
                acked.append((float(msg.value()), time.monotonic()))

        while not stop.is_set():
            producer.produce(topic, value=repr(time.monotonic()).encode(), partition=0,
                             on_delivery=delivered)
            producer.poll(0.002)
        producer.flush(60)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    while len(acked) < 50:
        time.sleep(0.05)
    victim = view.partition(topic, 0).leader
    killed_at = time.monotonic()
    cluster.kill(victim)
    view.new_leader(topic, 0, victim)
    while not any(sent > killed_at for sent, _ in acked):
        time.sleep(0.01)
    stop.set()
    writer.join(90)
    cluster.start(victim)
    view.fully_replicated(topic)
    return min(t for sent, t in acked if sent > killed_at) - killed_at


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-probes", type=int, default=500)
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()
    value = os.urandom(args.size)

    with tempfile.TemporaryDirectory() as tmp, ClusterProcess(
            Path(tmp) / "cluster", brokers=3, overrides=FAST_FAILOVER) as cluster:
        view = ClusterView(cluster.bootstrap)
        topics = {"RF=3": 3, "RF=1": 1}
        # The brokers' default min.insync.replicas is 2 (FAST_FAILOVER): with one replica,
        # acks=all would be refused NOT_ENOUGH_REPLICAS, as in Kafka.
        configs = {3: TOPIC_CONFIGS, 1: {"min.insync.replicas": "1"}}
        print(f"3 brokers, {args.messages} messages of {args.size} bytes, acks=all, "
              f"librdkafka {confluent_kafka.libversion()[0]}, median of {args.rounds} "
              "interleaved rounds")
        seconds: dict[str, list[float]] = {name: [] for name in topics}
        for round_no in range(args.rounds):
            for name, rf in topics.items():
                topic = f"bench-rf{rf}-{round_no}"
                create_topic(cluster.bootstrap, topic, 3, rf, configs[rf])
                view.fully_replicated(topic)
                seconds[name].append(
                    produce(cluster.bootstrap, topic, args.messages, value, "all", partitions=3))
        rate = {name: args.messages / statistics.median(s) for name, s in seconds.items()}
        print("throughput:")
        for name in topics:
            print(f"  {name}: {rate[name]:>9,.0f} msg/s  {rate[name] * args.size / 1e6:6.1f} MB/s")

        lat: dict[str, list[float]] = {}
        for name, rf in topics.items():
            topic = f"bench-latency-rf{rf}"
            create_topic(cluster.bootstrap, topic, 3, rf, configs[rf])
            view.fully_replicated(topic)
            lat[name] = latencies(cluster.bootstrap, topic, args.latency_probes, value)
        print(f"produce latency, one in flight ({args.latency_probes} probes):")
        for name in topics:
            print(f"  {name}: p50 {percentile(lat[name], 0.5) * 1000:6.2f} ms   "
                  f"p99 {percentile(lat[name], 0.99) * 1000:6.2f} ms")

        create_topic(cluster.bootstrap, "bench-failover", 1, 3, TOPIC_CONFIGS)
        view.fully_replicated("bench-failover")
        times = [failover(cluster, view, "bench-failover") for _ in range(args.failovers)]
        print(f"failover, kill -9 of the leader -> first acked produce on the new leader "
              f"({args.failovers} kills):")
        print(f"  median {statistics.median(times) * 1000:,.0f} ms   "
              f"min {min(times) * 1000:,.0f} ms   max {max(times) * 1000:,.0f} ms")

    print("ratios (same run):")
    print(f"  throughput RF=3 / RF=1: {rate['RF=3'] / rate['RF=1']:.2f}")
    for q in (0.5, 0.99):
        ratio = percentile(lat["RF=3"], q) / percentile(lat["RF=1"], q)
        print(f"  latency p{int(q * 100)} RF=3 / RF=1: {ratio:.2f}")


if __name__ == "__main__":
    main()
