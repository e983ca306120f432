"""A workload that records a full history: idempotent producers on each Python client and a
consumer group, all over real sockets, each in its own thread.

Every value is unique (`<client>-<n>`) and goes to partition n % partitions, so each
producer writes an ordered stream into every partition. Producers use acks=all and
idempotence, and retry long enough to ride through a failover. A write the client refuses
before sending is `fail`; any later error is `info` (it may have been written). The group
reads, records every record it sees, and commits synchronously after each poll. At the end,
`finish()` stops the producers, lets the group drain, and reads every partition in full; a
thread that does not stop in time is an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import aiokafka
import confluent_kafka
import kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.checker import History

PRODUCERS = ("confluent", "kafka-python", "aiokafka")
CONSUMERS = ("confluent", "kafka-python")
# Long enough for a leader election and a client's metadata refresh, several times over.
DELIVERY_TIMEOUT_MS = 60_000


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int,
                 configs: dict[str, str] | None = None, timeout: float = 30.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                            config=configs or {})],
                                  operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout)


class Workload:
    def __init__(self, bootstrap: str, topic: str, partitions: int, *,
                 producers: tuple[str, ...] = PRODUCERS,
                 consumers: tuple[str, ...] = CONSUMERS,
                 interval: float = 0.01) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.interval = interval
        self.history = History()
        self.group = f"group-{uuid.uuid4().hex[:8]}"
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._producer_threads = [self._thread(_PRODUCE[name], name) for name in producers]
        self._consumer_threads = [self._thread(_CONSUME[name], f"group-{name}")
                                  for name in consumers]
        self.errors: list[str] = []

    def _thread(self, target: Callable[[Workload, str], None], name: str) -> threading.Thread:
        def run() -> None:
            try:
                target(self, name)
            except Exception as exc:  # a crashed client must fail the test, not hang it
                self.errors.append(f"{name}: {exc!r}")
                raise
        return threading.Thread(target=run, name=name, daemon=True)

    def start(self) -> Workload:
        for thread in self._consumer_threads + self._producer_threads:
            thread.start()
        return self

    @property
    def producing(self) -> bool:
        return not self._stop_producing.is_set()

    def wait_for_acks(self, count: int, timeout: float = 60.0) -> None:
        """Block until `count` more writes are acknowledged (progress, not a timing)."""
        target = len(self.history.acked()) + count
        deadline = time.monotonic() + timeout
        while len(self.history.acked()) < target:
            if self.errors or time.monotonic() > deadline:
                raise AssertionError(f"no progress: {self.history.summary()}; {self.errors}")
            time.sleep(0.05)

    def finish(self, drain_timeout: float = 60.0) -> History:
        self._stop_producing.set()
        self._join(self._producer_threads, DELIVERY_TIMEOUT_MS / 1000 + 30)
        acked = {w.value for w in self.history.acked()}
        deadline = time.monotonic() + drain_timeout
        while self._consumer_threads and time.monotonic() < deadline:
            if acked <= {r.value for r in list(self.history.reads)}:
                break
            time.sleep(0.1)
        self._stop_consuming.set()
        self._join(self._consumer_threads, 30)
        self.history.consumers_drained = bool(self._consumer_threads)
        self.history.final_read(final_read(self.bootstrap, self.topic, self.partitions))
        return self.history

    def _join(self, threads: list[threading.Thread], timeout: float) -> None:
        join_or_report(threads, timeout, self.errors)

    def attempts(self, name: str) -> Iterator[tuple[str, int]]:
        """While producing: each next unique value of `name` and its partition, recorded
        as invoked before the caller hands it to its client."""
        n = 0
        while self.producing:
            value = f"{name}-{n}"
            self.history.invoke(name, value)
            yield value, n % self.partitions
            n += 1


# -- producers -----------------------------------------------------------------------------
def produce_confluent(w: Workload, name: str) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": w.bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.timeout.ms": DELIVERY_TIMEOUT_MS,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    pending: set[str] = set()

    def delivered(err: Any, msg: Any) -> None:
        value = msg.value().decode()
        pending.discard(value)
        if err is None:
            w.history.ok(value, msg.partition(), msg.offset())
        else:
            w.history.info(value, str(err))

    for value, partition in w.attempts(name):
        try:
            producer.produce(w.topic, value=value.encode(), partition=partition,
                             on_delivery=delivered)
            pending.add(value)
        except (BufferError, confluent_kafka.KafkaException) as exc:
            w.history.fail(value, repr(exc))  # refused locally: never sent
        producer.poll(w.interval)
    producer.flush(DELIVERY_TIMEOUT_MS / 1000)
    for value in list(pending):
        w.history.info(value, "no delivery report before the end")


def produce_kafka_python(w: Workload, name: str) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=w.bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS, request_timeout_ms=10_000,
        max_block_ms=10_000, metadata_max_age_ms=5_000,
    )
    futures: list[tuple[str, Any]] = []
    for value, partition in w.attempts(name):
        try:
            futures.append((value, producer.send(w.topic, value=value.encode(),
                                                 partition=partition)))
        except kafka.errors.KafkaError as exc:
            w.history.fail(value, repr(exc))
        time.sleep(w.interval)
        futures = _settle_kafka_python(w, futures, block=False)
    producer.flush(DELIVERY_TIMEOUT_MS / 1000)
    _settle_kafka_python(w, futures, block=True)
    producer.close(5)


def _settle_kafka_python(w: Workload, futures: list[tuple[str, Any]], *, block: bool
                         ) -> list[tuple[str, Any]]:
    """Record completed sends in the order they were sent; keep the rest."""
    waiting = []
    for value, future in futures:
        if not future.is_done and not block:
            waiting.append((value, future))
        elif not future.is_done:
            w.history.info(value, "no answer before the end")
        elif future.succeeded():
            w.history.ok(value, future.value.partition, future.value.offset)
        else:
            w.history.info(value, repr(future.exception))
    return waiting


def produce_aiokafka(w: Workload, name: str) -> None:
    asyncio.run(_produce_aiokafka(w, name))


async def _produce_aiokafka(w: Workload, name: str) -> None:
    producer = aiokafka.AIOKafkaProducer(
        bootstrap_servers=w.bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
        request_timeout_ms=DELIVERY_TIMEOUT_MS, metadata_max_age_ms=5_000,
    )
    await producer.start()
    sent: list[asyncio.Future[Any]] = []
    pending: set[str] = set()

    def settle(value: str, future: asyncio.Future[Any]) -> None:
        pending.discard(value)
        if future.cancelled():
            w.history.info(value, "cancelled")
        elif future.exception() is not None:
            w.history.info(value, repr(future.exception()))
        else:
            meta = future.result()
            w.history.ok(value, meta.partition, meta.offset)

    try:
        for value, partition in w.attempts(name):
            try:
                future = await producer.send(w.topic, value=value.encode(),
                                             partition=partition)
            except aiokafka.errors.KafkaError as exc:
                w.history.fail(value, repr(exc))
            else:
                pending.add(value)
                future.add_done_callback(lambda f, v=value: settle(v, f))
                sent.append(future)
            await asyncio.sleep(w.interval)
        if sent:
            await asyncio.wait(sent, timeout=DELIVERY_TIMEOUT_MS / 1000)
    finally:
        await producer.stop()
        await asyncio.sleep(0)  # let the last done-callbacks run
    for value in list(pending):
        w.history.info(value, "no answer before the end")


_PRODUCE: dict[str, Callable[[Workload, str], None]] = {
    "confluent": produce_confluent, "kafka-python": produce_kafka_python,
    "aiokafka": produce_aiokafka,
}


# -- the consumer group --------------------------------------------------------------------
def consume_confluent(w: Workload, name: str) -> None:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": w.bootstrap, "group.id": w.group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    consumer.subscribe([w.topic])
    try:
        while not w._stop_consuming.is_set():
            messages = consumer.consume(100, 0.2)
            records = [m for m in messages if m.error() is None]
            for m in records:
                w.history.read(name, m.partition(), m.offset(), None, m.value().decode())
            if records:
                with contextlib.suppress(confluent_kafka.KafkaException):
                    consumer.commit(asynchronous=False)  # retried by the next poll's commit
    finally:
        consumer.close()


def consume_kafka_python(w: Workload, name: str) -> None:
    consumer = kafka.KafkaConsumer(
        w.topic, bootstrap_servers=w.bootstrap, group_id=w.group, enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=6000, metadata_max_age_ms=5_000,
    )
    try:
        while not w._stop_consuming.is_set():
            batches = consumer.poll(timeout_ms=200)
            for tp, records in batches.items():
                for r in records:
                    w.history.read(name, tp.partition, r.offset, None, r.value.decode())
            if batches:
                with contextlib.suppress(kafka.errors.KafkaError):
                    consumer.commit()
    finally:
        consumer.close(autocommit=False)


_CONSUME: dict[str, Callable[[Workload, str], None]] = {
    "confluent": consume_confluent, "kafka-python": consume_kafka_python,
}


# -- the final read ------------------------------------------------------------------------
def final_read(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
               ) -> dict[int, list[tuple[int, str | None, str]]]:
    """Every record of every partition, from the log start to the high watermark."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"final-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    out: dict[int, list[tuple[int, str | None, str]]] = {p: [] for p in range(partitions)}
    try:
        ends = {p: _high_watermark(consumer, topic, p, timeout) for p in range(partitions)}
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions) if ends[p] > 0])
        next_offset = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout
        while any(next_offset[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read stuck at {next_offset} of {ends}")
            for m in consumer.consume(500, 0.5):
                if m.error() is not None:
                    continue
                key = m.key().decode() if m.key() is not None else None
                out[m.partition()].append((m.offset(), key, m.value().decode()))
                next_offset[m.partition()] = m.offset() + 1
    finally:
        consumer.close()
    return out


_MOVING = {confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION,
           confluent_kafka.KafkaError.LEADER_NOT_AVAILABLE,
           confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART,
           confluent_kafka.KafkaError.OFFSET_NOT_AVAILABLE,  # a new leader's HW catching up
           confluent_kafka.KafkaError._TRANSPORT, confluent_kafka.KafkaError._TIMED_OUT}


def _high_watermark(consumer: confluent_kafka.Consumer, topic: str, partition: int,
                    timeout: float) -> int:
    """The partition's high watermark, asked again while leadership is still moving (the
    client's one-shot query does not retry NOT_LEADER_OR_FOLLOWER itself)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, partition), timeout=timeout)
            return int(high)
        except confluent_kafka.KafkaException as exc:
            if exc.args[0].code() not in _MOVING or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def join_or_report(threads: list[threading.Thread], timeout: float, errors: list[str]) -> None:
    """Wait for each thread; one still running is an error (a client that hangs)."""
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            errors.append(f"{thread.name}: still in a client call {timeout:g} s after the stop")
