"""A consumer group of 10 members rebalancing when an 11th joins: KIP-848 against classic.

On one built-in broker, a producer keeps every partition of a 20-partition topic busy
(--rate msg/s). A group of 10 confluent-kafka members consumes it until each has consumed;
then an 11th member joins, and the figure is the time from its subscribe until every one
of the 11 has consumed a message again (members that keep their partitions count too, so
the eager classic protocol's stop-the-world shows). Each protocol runs with Kafka's
defaults: classic with librdkafka's `range,roundrobin` (eager) and with
`cooperative-sticky`, consumer (`group.protocol=consumer`) with the broker's `uniform`
assignor and 5 s heartbeats. Rounds are interleaved; medians and ratios are printed.

    .venv/bin/python bench/group_rebalance.py [--rounds 3] [--rate 400]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.brokerproc import BrokerProcess

PARTITIONS = 20
MEMBERS = 10
CASES = {
    "classic eager (range,roundrobin)": {"group.protocol": "classic"},
    "classic cooperative-sticky": {"group.protocol": "classic",
                                   "partition.assignment.strategy": "cooperative-sticky"},
    "consumer (KIP-848)": {"group.protocol": "consumer"},
}


class Member(threading.Thread):
    """Polls on its own thread; remembers when it last consumed a message."""

    def __init__(self, bootstrap: str, topic: str, group: str, config: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
            "enable.auto.commit": False, "log_level": 2, **config})
        self.consumer.subscribe([topic])
        self.last = 0.0
        self.times: list[float] = []
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                self.last = time.monotonic()
                self.times.append(self.last)
        self.consumer.close()


def wait(condition: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("the group did not settle")
        time.sleep(0.02)


def longest_pause(times: list[float], start: float, end: float) -> float:
    inside = [start, *(t for t in times if start < t < end), end]
    return max(b - a for a, b in itertools.pairwise(inside))


def one_round(bootstrap: str, topic: str, config: dict[str, str]) -> tuple[float, float]:
    """(seconds until all 11 consume again, member-seconds the 10 others stood still)"""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, topic, group, config) for _ in range(MEMBERS)]
    try:
        started = time.monotonic()
        wait(lambda: all(m.last > started for m in members))
        time.sleep(2)  # steady state
        joined = time.monotonic()
        members.append(Member(bootstrap, topic, group, config))
        wait(lambda: all(m.last > joined for m in members))
        settled = max(m.last for m in members)
        time.sleep(1)
        stood = sum(longest_pause(m.times, joined, settled + 1) for m in members[:MEMBERS])
        return settled - joined, stood
    finally:
        for m in members:
            m.stopping.set()
        for m in members:
            m.join(30)


def produce_forever(bootstrap: str, topic: str, rate: float, stop: threading.Event) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                         "log_level": 2})
    i = 0
    while not stop.is_set():
        producer.produce(topic, b"x" * 100, partition=i % PARTITIONS)
        producer.poll(0)
        i += 1
        time.sleep(1 / rate)
    producer.flush(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=400.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp)).start()
        stop = threading.Event()
        try:
            topic = "rebalance-bench"
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            threading.Thread(target=produce_forever, daemon=True,
                             args=(broker.bootstrap, topic, args.rate, stop)).start()
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
            for r in range(args.rounds):
                for name, config in CASES.items():
                    times[name].append(one_round(broker.bootstrap, topic, config))
                    print(f"round {r + 1}: {name}: {times[name][-1][0]:.2f} s, others "
                          f"paused {times[name][-1][1]:.2f} member-s", flush=True)
        finally:
            stop.set()
            broker.stop()
    report(times)


def report(times: dict[str, list[tuple[float, float]]]) -> None:
    print(f"\nan 11th member joins a group of {MEMBERS} ({PARTITIONS} partitions), medians:")
    print(f"  {'':34} {'all 11 consume':>15} {'ratio':>6} {'others paused':>15} {'ratio':>6}")
    base = [statistics.median(v[i] for v in times["consumer (KIP-848)"]) for i in (0, 1)]
    for name, values in times.items():
        settle, paused = (statistics.median(v[i] for v in values) for i in (0, 1))
        print(f"  {name:34} {settle:13.2f} s {settle / base[0]:6.2f} "
              f"{paused:9.2f} mbr-s {paused / base[1]:6.2f}")


if __name__ == "__main__":
    main()
