"""A transactional workload that records a full history for the checker (`checker.py`).

Two confluent-kafka transactional producers share one topic:

- `txn`: transactions of 1 to 6 values (`txn-<n>-<i>`, partition i % partitions) that it
  commits or aborts at random;
- `ctp`: consume-transform-produce. A read_committed consumer (partitions assigned, offsets
  of the group `group`) reads the topic; for each `txn-` record it writes `ctp<k>-<value>`
  (k: its transaction's number, so a retried transform is a new value) to the same
  partition and commits the consumed offsets with `send_offsets_to_transaction`, then
  commits or aborts at random. After an abort it rewinds to the group's committed offsets.

Each transaction completes its values together: `ok` (committed), `fail` (aborted) or
`info` (the outcome was not learnt: the commit failed fatally or timed out). A producer
that meets a fatal error (fenced, or a coordinator that lost its state) is replaced by a
new one with the same transactional id, whose InitProducerId settles the open transaction.
At the end, the topic is read in full with read_committed and the group's offsets are read;
a thread that has not finished by then is an error (a client that hangs fails the test).

The producers close connections idle for `IDLE_MS`. librdkafka (2.16, issues #5456 and
#5511) can otherwise leave `send_offsets_to_transaction` waiting for good, past its timeout:
when the cached group coordinator leaves the Metadata broker list (fenced, as Kafka drops
it), the client ends that broker's thread, and a TxnOffsetCommit waiting for it is looked at
again only on some broker's state change, at most once a second. A FindCoordinator that
still named the broker less than a second before its thread ended leaves nothing to change
state; the transaction coordinator then aborts the open transaction on timeout, and the
client never calls again. An idle connection closing is such a state change, and by then
FindCoordinator names the new coordinator.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException, TopicPartition

from tests.cluster.checker import History
from tests.cluster.workload import join_or_report
from tests.compat.clients import no_open_transaction

TIMEOUT = 60.0  # seconds for each transactional call: several failovers long
COMMIT_RETRIES = 5
IDLE_MS = 5000  # connections.max.idle.ms: see the module's docstring
# `FAULTS_CLIENT_DEBUG=eos,broker,protocol` turns on librdkafka's debug contexts for the
# transactional producers; librdkafka writes them to stderr itself, from its own threads,
# so a client stuck inside a blocking call still logs (a Python `logger` would not).
CLIENT_DEBUG = os.environ.get("FAULTS_CLIENT_DEBUG", "")


class TxnWorkload:
    def __init__(self, bootstrap: str, topic: str, partitions: int, seed: int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = History()
        self.group = f"ctp-{uuid.uuid4().hex[:8]}"
        self.outcomes: dict[str, int] = {"committed": 0, "aborted": 0, "unknown": 0}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._ids = {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in ("txn", "ctp")}
        self._threads = [self._thread(_produce, "txn", random.Random(seed)),
                         self._thread(_transform, "ctp", random.Random(seed + 1))]

    def _thread(self, target: Callable[[TxnWorkload, str, random.Random], None], name: str,
                rng: random.Random) -> threading.Thread:
        def run() -> None:
            try:
                target(self, name, rng)
            except Exception as exc:  # a crashed client must fail the test, not hang it
                self.errors.append(f"{name}: {exc!r}")
                raise
        return threading.Thread(target=run, name=name, daemon=True)

    def start(self) -> TxnWorkload:
        for thread in self._threads:
            thread.start()
        return self

    def transactional_id(self, name: str) -> str:
        return self._ids[name]

    @property
    def running(self) -> bool:
        return not self._stop.is_set()

    def wait_for_commits(self, count: int, timeout: float = 90.0) -> None:
        """Block until `count` more transactions commit (progress, not a timing)."""
        target = self.outcomes["committed"] + count
        deadline = time.monotonic() + timeout
        while self.outcomes["committed"] < target:
            if self.errors or time.monotonic() > deadline:
                raise AssertionError(f"no transactional progress: {self.outcomes}; "
                                     f"{self.history.summary()}; {self.errors}")
            time.sleep(0.05)

    def finish(self) -> History:
        self._stop.set()
        # Each thread's longest transaction.
        join_or_report(self._threads, TIMEOUT * (COMMIT_RETRIES + 2), self.errors)
        self.history.committed_offsets = committed_offsets(
            self.bootstrap, self.topic, self.partitions, self.group)
        self.history.final_read(read_committed(self.bootstrap, self.topic, self.partitions))
        return self.history

    def producer(self, name: str) -> confluent_kafka.Producer:
        """A transactional producer, initialised (retried while the cluster fails over)."""
        for attempt in range(3):
            producer = confluent_kafka.Producer(
                producer_config(self.bootstrap, self._ids[name], name))
            try:
                producer.init_transactions(TIMEOUT)
                return producer
            except KafkaException as exc:
                if attempt == 2 or exc.args[0].fatal():
                    raise
        raise AssertionError("unreachable")

    def run_transaction(self, producer: confluent_kafka.Producer, name: str,
                        writes: list[tuple[str, int]], commit: bool,
                        before_end: Callable[[], None] = lambda: None) -> str:
        """One transaction of `writes` (value, partition): its outcome, recorded."""
        delivered: dict[str, tuple[int, int]] = {}

        def report(err: Any, msg: Any) -> None:
            if err is None:
                delivered[msg.value().decode()] = (msg.partition(), msg.offset())

        for value, _ in writes:
            self.history.invoke(name, value)
        self.history.transaction([v for v, _ in writes])
        try:
            producer.begin_transaction()
            for value, partition in writes:
                producer.produce(self.topic, value=value.encode(), partition=partition,
                                 on_delivery=report)
            before_end()
            producer.flush(TIMEOUT)
        except (KafkaException, BufferError) as exc:
            commit = False  # never asked to commit: the coordinator cannot commit it
            if isinstance(exc, KafkaException) and exc.args[0].fatal():
                outcome = "aborted"
                self._record(writes, outcome, delivered, str(exc.args[0]))
                raise _Replace from exc
        outcome = _end(producer, commit)
        self._record(writes, outcome, delivered, "")
        if outcome == "unknown":
            raise _Replace
        return outcome

    def _record(self, writes: list[tuple[str, int]], outcome: str,
                delivered: dict[str, tuple[int, int]], error: str) -> None:
        self.outcomes[outcome] += 1
        for value, partition in writes:
            if outcome == "committed":
                position = delivered.get(value)
                self.history.ok(value, partition, position[1] if position else None)
            elif outcome == "aborted":
                self.history.fail(value, error or "aborted")
            else:
                self.history.info(value, error or "outcome unknown")


def producer_config(bootstrap: str, transactional_id: str, client_id: str) -> dict[str, Any]:
    """The transactional producers' settings."""
    return {
        "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
        "client.id": client_id, "transaction.timeout.ms": int(TIMEOUT * 1000),
        "linger.ms": 5, "message.timeout.ms": int(TIMEOUT * 1000),
        "topic.metadata.refresh.interval.ms": 1000, "connections.max.idle.ms": IDLE_MS,
        **({"debug": CLIENT_DEBUG} if CLIENT_DEBUG else {}),
    }


class _Replace(Exception):
    """The producer is unusable (fatal error, or a commit whose outcome is unknown)."""


def _end(producer: confluent_kafka.Producer, commit: bool) -> str:
    """Commit (retrying what the client calls retriable) or abort: the outcome. Once a
    commit was asked for, only an abort that then succeeds makes it "aborted"."""
    asked_commit = commit
    undecided = "unknown" if asked_commit else "aborted"
    for _ in range(COMMIT_RETRIES):
        try:
            if commit:
                producer.commit_transaction(TIMEOUT)
                return "committed"
            producer.abort_transaction(TIMEOUT)
            return "aborted"
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                commit = False
            elif not error.retriable():
                return undecided
    return undecided


def _produce(w: TxnWorkload, name: str, rng: random.Random) -> None:
    producer = w.producer(name)
    n = 0
    while w.running:
        writes = [(f"txn-{n}-{i}", i % w.partitions) for i in range(rng.randint(1, 6))]
        n += 1
        try:
            w.run_transaction(producer, name, writes, commit=rng.random() < 0.7)
        except _Replace:
            producer = w.producer(name)
        time.sleep(0.01)


def _transform(w: TxnWorkload, name: str, rng: random.Random) -> None:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": w.bootstrap, "group.id": w.group, "enable.auto.commit": False,
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
    })
    assignment = [TopicPartition(w.topic, p) for p in range(w.partitions)]
    consumer.assign(assignment)
    producer = w.producer(name)
    k = 0
    try:
        while w.running:
            records = [m for m in consumer.consume(50, 0.3) if m.error() is None]
            for m in records:
                w.history.read(name, m.partition(), m.offset(), None, m.value().decode())
            if not records:
                continue
            k += 1
            sources = [m for m in records if m.value().startswith(b"txn-")]
            writes = [(f"ctp{k}-{m.value().decode()}", m.partition()) for m in sources]
            for (output, _), m in zip(writes, sources, strict=True):
                w.history.derive(output, m.value().decode())
            try:
                outcome = _transform_once(w, producer, consumer, name, writes, rng)
            except _Replace:  # the new producer's InitProducerId settles the old one's
                producer, outcome = w.producer(name), "unknown"
            if outcome != "committed":
                consumer.unassign()  # rewind to the group's committed offsets
                consumer.assign(assignment)
    finally:
        consumer.close()


def _transform_once(w: TxnWorkload, producer: confluent_kafka.Producer,
                    consumer: confluent_kafka.Consumer, name: str,
                    writes: list[tuple[str, int]], rng: random.Random) -> str:
    def send_offsets() -> None:
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                             TIMEOUT)
    return w.run_transaction(producer, name, writes, commit=rng.random() < 0.8,
                             before_end=send_offsets)


def committed_offsets(bootstrap: str, topic: str, partitions: int, group: str
                      ) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                   timeout=TIMEOUT)
    finally:
        consumer.close()
    return {tp.partition: max(tp.offset, 0) for tp in found}


def read_committed(bootstrap: str, topic: str, partitions: int
                   ) -> dict[int, list[tuple[int, str | None, str]]]:
    """Every committed record, read to each partition's last stable offset once no
    transaction holds it back: the coordinator writes the markers after the transactions
    ended (and aborts one left open after its timeout). If the ends never meet, the read
    takes what is stable and the checker judges. Offsets alone cannot tell where the reading
    ends (the log ends in control records read_committed never delivers): the consumer's
    end-of-partition events do."""
    deadline = time.monotonic() + TIMEOUT + 30
    while not no_open_transaction(bootstrap, topic, partitions) and time.monotonic() < deadline:
        time.sleep(0.2)
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"final-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "enable.partition.eof": True,
    })
    out: dict[int, list[tuple[int, str | None, str]]] = {p: [] for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    ended: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(ended) < partitions and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    out[m.partition()].append((m.offset(), None, m.value().decode()))
                elif m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
    finally:
        consumer.close()
    return out
