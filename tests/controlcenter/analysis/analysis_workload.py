"""A consumer group that really lags, and the collector recording it, for the analytics tests.

`run_workload` builds it on a cluster: a backlog on three of a topic's four partitions, a
producer at known rates per partition, a slow group (a confluent-kafka consumer that fetches
freely but processes each partition at its own rate, committing what it processed) and a
fast group (processes everything it fetches). The real collector (`Collector.cycle`, history
topics on) samples both groups about once a second. The first cycle runs before anything
moves and the last after everything stopped, so the first and last samples' offsets are
known exactly here, and each cycle's time is bounded by when the test called it: that is
what the expected values are computed from.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.test.utils import override_settings

from controlcenter.collector.loop import Collector, CollectorConfig

PRODUCE = {0: 40, 1: 10, 2: 10, 3: 10}  # records/s into each partition while the run lasts
CONSUME = {0: 20, 1: 30, 2: 30, 3: 30}  # the slow group's processing rate per partition
BACKLOG = {0: 0, 1: 1200, 2: 900, 3: 2400}  # records waiting before the run
RUN_S = 8.0  # the checks hold for any length; the SLA's needs the backlogs to last
COMMIT_EVERY_S = 0.2


@dataclass(frozen=True)
class Cycle:
    """One collector cycle: its sample's timestamp lies between these (epoch seconds)."""

    started: float
    ended: float


@dataclass
class Workload:
    bootstrap: str
    topic: str
    slow_group: str
    fast_group: str
    produced: Counter[int] = field(default_factory=Counter)  # records per partition
    keys: Counter[str] = field(default_factory=Counter)
    committed: dict[str, dict[int, int]] = field(default_factory=dict)  # final, per group
    cycles: list[Cycle] = field(default_factory=list)


class PacedConsumer(threading.Thread):
    """A group member that processes each partition at `rates` records/s from `go` (all it
    has fetched when a rate is None), commits what it processed every COMMIT_EVERY_S and,
    on `freeze`, commits once more and stops processing; it stays in the group until
    `close`. It starts at `start_at` (committed before `ready`)."""

    def __init__(self, bootstrap: str, topic: str, group: str, rates: dict[int, int | None],
                 start_at: dict[int, int]) -> None:  # fmt: skip
        super().__init__(daemon=True, name=f"consumer-{group}")
        self.topic, self.rates, self.position = topic, rates, dict(start_at)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self.fetched: dict[int, deque[int]] = {p: deque() for p in rates}
        self.ready, self.go, self.freeze = threading.Event(), threading.Event(), threading.Event()
        self.frozen, self.closing = threading.Event(), threading.Event()
        self.catch_up_to: dict[int, int] | None = None  # a fast group's last offsets, on freeze
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - a thread hands any failure to the test thread
            self.error = exc
            self.ready.set()
            self.frozen.set()
        finally:
            self.consumer.close()

    def _run(self) -> None:
        self.consumer.subscribe([self.topic])
        while len(self.consumer.assignment()) < len(self.rates):
            self._fetch()
        self._commit(set(self.rates))
        self.ready.set()
        last_commit = time.monotonic()
        while not self.closing.is_set():
            self._fetch()
            if self.go.is_set() and not self.frozen.is_set():
                changed = self._process()
                if self.freeze.is_set() and self._caught_up():
                    self._commit(set(self.rates))
                    self.frozen.set()
                elif changed and time.monotonic() - last_commit >= COMMIT_EVERY_S:
                    self._commit(changed)
                    last_commit = time.monotonic()

    def _fetch(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.fetched[msg.partition()].append(msg.offset())

    def _process(self) -> set[int]:
        elapsed = time.monotonic() - self.go_at
        changed = set()
        for p, rate in self.rates.items():
            queue = self.fetched[p]
            while queue and queue[0] < self.position[p]:
                queue.popleft()  # the backlog it starts past (a fast group)
            room = len(queue) if rate is None else int(rate * elapsed) - self.processed(p)
            for _ in range(max(0, min(room, len(queue)))):
                self.position[p] = queue.popleft() + 1
                changed.add(p)
        return changed

    def processed(self, partition: int) -> int:
        return self.position[partition] - self.started_at[partition]

    def _caught_up(self) -> bool:
        wanted = self.catch_up_to or {}
        return all(self.position[p] >= end for p, end in wanted.items())

    def _commit(self, partitions: set[int]) -> None:
        self.consumer.commit(offsets=[TopicPartition(self.topic, p, self.position[p])
                                      for p in sorted(partitions)], asynchronous=False)

    def start_processing(self) -> None:
        self.started_at, self.go_at = dict(self.position), time.monotonic()
        self.go.set()


def run_workload(bootstrap: str, db_access: Callable[[], Any]) -> Workload:
    """The whole scenario, start to end; `db_access()` is a context in which the collector
    may write its tables (pytest-django's `django_db_blocker.unblock`)."""
    tag = uuid.uuid4().hex[:8]
    work = Workload(bootstrap, f"orders-{tag}", f"slow-{tag}", f"fast-{tag}")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until it answers
    admin.create_topics([NewTopic(work.topic, len(PRODUCE), 1)])[work.topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered = _recorder(work)
    for p, n in BACKLOG.items():
        for i in range(n):
            _send(producer, work.topic, p, i, delivered)
    assert producer.flush(30) == 0 and work.produced == +Counter(BACKLOG)
    slow = PacedConsumer(bootstrap, work.topic, work.slow_group, dict(CONSUME),
                         dict.fromkeys(PRODUCE, 0))
    fast = PacedConsumer(bootstrap, work.topic, work.fast_group, dict.fromkeys(PRODUCE),
                         dict(BACKLOG))
    consumers = (slow, fast)
    with db_access(), override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        collector = Collector(CollectorConfig(bootstrap_servers=bootstrap, interval=1.0))
        try:
            for consumer in consumers:
                consumer.start()
            for consumer in consumers:
                assert consumer.ready.wait(60) and consumer.error is None, consumer.error
            _cycle(collector, work)  # before anything moves: offsets known exactly
            _run(producer, work, consumers, collector, delivered)
            _cycle(collector, work)  # after everything stopped
        finally:
            for consumer in consumers:
                consumer.closing.set()
                consumer.join(30)
            collector.close()  # flushes the history producer
    assert collector.history is not None and collector.history.failed == 0
    work.committed = {work.slow_group: slow.position, work.fast_group: fast.position}
    return work


def _run(producer: Producer, work: Workload, consumers: tuple[PacedConsumer, ...],
         collector: Collector, delivered: Callable[[Any, Any], None]) -> None:  # fmt: skip
    """RUN_S seconds of producing at PRODUCE and consuming, a collector cycle a second; then
    the producer stops (everything delivered), and the consumers commit and freeze."""
    for consumer in consumers:
        consumer.start_processing()
    started = time.monotonic()
    sent: Counter[int] = Counter()
    next_cycle = started + 1.0
    while (now := time.monotonic()) < started + RUN_S:
        for p, rate in PRODUCE.items():
            while sent[p] < int(rate * (now - started)):
                _send(producer, work.topic, p, BACKLOG[p] + sent[p], delivered)
                sent[p] += 1
        producer.poll(0)
        if now >= next_cycle:
            _cycle(collector, work)
            next_cycle = time.monotonic() + 1.0
        time.sleep(0.02)
    assert producer.flush(30) == 0
    for consumer in consumers:
        if consumer.rates[0] is None:
            consumer.catch_up_to = dict(work.produced)
        consumer.freeze.set()
    for consumer in consumers:
        assert consumer.frozen.wait(60) and consumer.error is None, consumer.error


def _cycle(collector: Collector, work: Workload) -> None:
    started = time.time()
    collector.cycle()
    work.cycles.append(Cycle(started, time.time()))


def _send(producer: Producer, topic: str, partition: int, i: int,
          on_delivery: Callable[[Any, Any], None]) -> None:  # fmt: skip
    key = "hot" if i % 2 == 0 else f"k{partition}-{i % 4}"
    producer.produce(topic, f"order {i}".encode(), key.encode(), partition=partition,
                     on_delivery=on_delivery)


def _recorder(work: Workload) -> Callable[[Any, Any], None]:
    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            raise KafkaException(err)
        work.produced[msg.partition()] += 1
        work.keys[msg.key().decode()] += 1

    return delivered
