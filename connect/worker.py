"""Running tasks: each task on a thread of its own, with its own Kafka client.

A source task's records and, when exactly-once sources are enabled, its offsets go to Kafka
in one transaction per poll (KIP-618: the transactional id `<group.id>-<connector>-<task>`
fences a zombie of the same task on another worker). Otherwise records are produced and the
offsets written every `offset.flush.interval.ms` after the producer flushed (at least once).

A sink task consumes in the group `connect-<connector>`, committing offsets after the
task's `flush()`, so a record is in the sink at least once.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from operator import attrgetter, itemgetter
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from connect.api import (
    DataException,
    OffsetStorageReader,
    RetriableException,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    Task,
)
from connect.converters import Converter
from connect.metrics import TaskMetrics
from connect.storage import OffsetStore, dumps, partition_key

log = logging.getLogger(__name__)

Report = Callable[[str, str | None], None]  # state, trace
_SECOND = itemgetter(1)  # a message's timestamp() is (type, ms)
_new_sink_record = partial(tuple.__new__, SinkRecord)  # from a tuple of its fields, in C
# a source batch's columns
_SOURCE_PARTITION = attrgetter("source_partition")
_TOPIC, _KEY, _KEY_SCHEMA = attrgetter("topic"), attrgetter("key"), attrgetter("key_schema")
_VALUE, _VALUE_SCHEMA = attrgetter("value"), attrgetter("value_schema")
_PARTITION, _TIMESTAMP = attrgetter("partition"), attrgetter("timestamp")
_HEADERS = attrgetter("headers")


@dataclass
class TaskSetup:
    connector: str
    task_id: int
    config: dict[str, str]
    connector_config: dict[str, str]
    task_class: type[Task]
    key_converter: Converter
    value_converter: Converter
    client_settings: dict[str, str]
    report: Report
    group_id: str
    flush_interval_s: float
    exactly_once: bool


class TaskRunner:
    """Runs one task until stopped; the thread reports RUNNING, PAUSED, FAILED, UNASSIGNED."""

    def __init__(self, setup: TaskSetup) -> None:
        self.setup = setup
        self.task = setup.task_class()
        self.stopping = threading.Event()
        self.paused = False
        self.tolerate_all = setup.connector_config.get("errors.tolerance", "none") == "all"
        self.metrics = TaskMetrics()
        self.thread = threading.Thread(
            target=self._main, name=f"task-{setup.connector}-{setup.task_id}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 10) -> None:
        self.stopping.set()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout)

    def pause(self, paused: bool) -> None:
        if paused != self.paused:
            self.paused = paused
            self.setup.report("PAUSED" if paused else "RUNNING", None)

    def failed(self) -> bool:
        return not self.thread.is_alive() and not self.stopping.is_set()

    def _main(self) -> None:
        try:
            self.run()
        except Exception:  # noqa: BLE001 - the task's own failure: FAILED, with the trace, the worker goes on
            trace = traceback.format_exc()
            log.error("task %s-%d failed:\n%s", self.setup.connector, self.setup.task_id, trace)
            self.setup.report("FAILED", trace)

    def run(self) -> None:
        raise NotImplementedError

    def tolerate(self, exc: DataException, what: str) -> None:
        if not self.tolerate_all:
            raise exc
        if self.setup.connector_config.get("errors.log.enable", "false") == "true":
            log.warning("task %s-%d: skipping %s: %s", self.setup.connector,
                        self.setup.task_id, what, exc)


class SourceTaskRunner(TaskRunner):
    def __init__(self, setup: TaskSetup, offsets: OffsetStore,
                 on_topic: Callable[[str], None]) -> None:
        super().__init__(setup)
        self.offsets = offsets
        self.on_topic = on_topic
        self.seen_topics: set[str] = set()
        self.pending: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.failures: list[KafkaError] = []  # delivery reports' errors
        # delivery reports of every record only for a task that overrides commit_record()
        self.wants_acks = (isinstance(self.task, SourceTask) and
                           type(self.task).commit_record is not SourceTask.commit_record)

    def _producer(self) -> Producer:
        settings: dict[str, Any] = {**self.setup.client_settings, "acks": "all",
                                    "enable.idempotence": True, "linger.ms": 5,
                                    "delivery.report.only.error": not self.wants_acks,
                                    "on_delivery": self._delivered}
        if self.setup.exactly_once:
            settings["transactional.id"] = (
                f"{self.setup.group_id}-{self.setup.connector}-{self.setup.task_id}")
        return Producer(settings)

    def run(self) -> None:
        producer = self._producer()
        if self.setup.exactly_once:
            producer.init_transactions(30)  # fences a zombie, aborts what it left open
        self.offsets.log.read_to_end()
        task = self.task
        assert isinstance(task, SourceTask)
        task.initialize(SourceTaskContext(OffsetStorageReader(
            self.offsets.of(self.setup.connector)), self.setup.config))
        task.start(self.setup.config)
        self.setup.report("PAUSED" if self.paused else "RUNNING", None)
        last_flush = time.monotonic()
        try:
            while not self.stopping.is_set():
                if self.paused:
                    time.sleep(0.1)
                    continue
                records = self._poll(task)
                if records:
                    self._send(producer, records)
                    self.metrics.record(len(records))
                if (not self.setup.exactly_once and
                        time.monotonic() - last_flush > self.setup.flush_interval_s):
                    self._commit_offsets(producer, task)
                    last_flush = time.monotonic()
        finally:
            task.stop()
        if not self.setup.exactly_once:
            self._commit_offsets(producer, task)
        self.setup.report("UNASSIGNED", None)

    @staticmethod
    def _poll(task: SourceTask) -> list[SourceRecord] | None:
        try:
            return task.poll()
        except RetriableException as exc:
            log.info("source task poll: %s; polling again", exc)
            return None

    def _send(self, producer: Producer, records: list[SourceRecord]) -> None:
        if self.setup.exactly_once:
            producer.begin_transaction()
        if self.wants_acks or not self._produce_batch(producer, records):
            acked = self._acked()
            for record in records:
                self._produce(producer, record, None if acked is None else acked(record))
        # the last record of each source partition, by partition object (most tasks reuse
        # one), found in C
        last = dict(zip(map(id, map(_SOURCE_PARTITION, records)), records, strict=True))
        for record in last.values():
            self.pending[partition_key(record.source_partition)] = (
                dict(record.source_partition), dict(record.source_offset))
        if self.setup.exactly_once:
            self._write_offsets(producer)
            producer.commit_transaction(30)
            self.pending.clear()
            self.task.commit()  # type: ignore[attr-defined]
        else:
            producer.poll(0)
        self._raise_failures()

    def _delivered(self, err: KafkaError | None, _msg: Any) -> None:
        """The producer's delivery report (`delivery.report.only.error`: failures only)."""
        if err is not None:
            self.failures.append(err)

    def _raise_failures(self) -> None:
        if self.failures:
            raise KafkaException(self.failures[0])

    def _produce_batch(self, producer: Producer, records: list[SourceRecord]) -> bool:
        """Produces a poll's records column by column, as the sink converts them: the
        converters take whole columns (`Converter.from_connect_batch`) and the loop makes
        one `produce` call per record with the producer's own delivery report, so the Python
        work per record is that call (bench/README.md). False, having produced nothing, when
        some record names a partition, a timestamp or headers, or a record cannot be
        converted: `_produce` then takes them one by one, and errors.tolerance skips only
        the record that failed."""
        count = len(records)
        if (list(map(_PARTITION, records)).count(None) < count
                or list(map(_TIMESTAMP, records)).count(None) < count
                or any(map(_HEADERS, records))):
            return False
        topics = list(map(_TOPIC, records))
        try:
            keys = self.setup.key_converter.from_connect_batch(
                topics, list(map(_KEY_SCHEMA, records)), list(map(_KEY, records)))
            values = self.setup.value_converter.from_connect_batch(
                topics, list(map(_VALUE_SCHEMA, records)), list(map(_VALUE, records)))
        except DataException:
            return False
        produce = producer.produce
        for topic, value, key in zip(topics, values, keys, strict=True):
            try:
                produce(topic, value, key)
            except BufferError:
                self._produce_when_room(producer, topic, value, key)
        for topic in set(topics).difference(self.seen_topics):
            self.seen_topics.add(topic)
            self.on_topic(topic)
        return True

    @staticmethod
    def _produce_when_room(producer: Producer, *args: Any, **kwargs: Any) -> None:
        while True:
            producer.poll(0.1)  # delivery reports free the queue
            try:
                producer.produce(*args, **kwargs)
                return
            except BufferError:
                continue

    def _acked(self) -> Callable[[SourceRecord], Callable[[KafkaError | None, Any], None]] | None:
        """Per-record delivery callbacks that hand each acknowledged record's offset to the
        task's commit_record(), for the tasks that override it (MirrorMaker's offset syncs)."""
        task = self.task
        assert isinstance(task, SourceTask)
        if not self.wants_acks:
            return None
        failures = self.failures

        def for_record(record: SourceRecord) -> Callable[[KafkaError | None, Any], None]:
            def delivered(err: KafkaError | None, msg: Any) -> None:
                if err is not None:
                    failures.append(err)
                else:
                    task.commit_record(record, msg.partition(), msg.offset())
            return delivered
        return for_record

    def _produce(self, producer: Producer, record: SourceRecord,
                 delivered: Callable[[KafkaError | None, Any], None] | None) -> None:
        try:
            key = self.setup.key_converter.from_connect_data(record.topic, record.key_schema,
                                                              record.key)
            value = self.setup.value_converter.from_connect_data(
                record.topic, record.value_schema, record.value)
        except DataException as exc:
            self.tolerate(exc, f"a record for {record.topic}")
            return
        extra: dict[str, Any] = {}
        if delivered is not None:  # else the producer's own report (_delivered)
            extra["on_delivery"] = delivered
        if record.partition is not None:
            extra["partition"] = record.partition
        if record.timestamp is not None:
            extra["timestamp"] = record.timestamp
        if record.headers:
            extra["headers"] = list(record.headers)
        try:
            producer.produce(record.topic, value, key, **extra)
        except BufferError:
            self._produce_when_room(producer, record.topic, value, key, **extra)
        if record.topic not in self.seen_topics:
            self.seen_topics.add(record.topic)
            self.on_topic(record.topic)

    def _write_offsets(self, producer: Producer) -> None:
        for partition, offset in self.pending.values():
            producer.produce(self.offsets.log.topic, value=dumps(offset),
                             key=OffsetStore.record_key(self.setup.connector, partition))

    def _commit_offsets(self, producer: Producer, task: SourceTask) -> None:
        if not self.pending:
            return
        if producer.flush(30) > 0:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        self._raise_failures()  # no offset past a record that was not written
        self._write_offsets(producer)
        producer.flush(30)
        self.pending.clear()
        task.commit()


class SinkTaskRunner(TaskRunner):
    def __init__(self, setup: TaskSetup, dlq_replication: int = 3) -> None:
        super().__init__(setup)
        self.consumed: dict[tuple[str, int], int] = {}
        config = setup.connector_config
        self.dlq_topic = config.get("errors.deadletterqueue.topic.name", "").strip()
        self.dlq_headers = config.get("errors.deadletterqueue.context.headers.enable") == "true"
        self.dlq: Producer | None = None
        self.paused_partitions = False
        self.failing = False

    def _consumer(self) -> Consumer:
        overrides = {k[len("consumer.override."):]: v
                     for k, v in self.setup.connector_config.items()
                     if k.startswith("consumer.override.")}
        consumer = Consumer({
            **self.setup.client_settings, "group.id": f"connect-{self.setup.connector}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            # librdkafka's 1,000 ms: once its prefetch queue is full a partition's next fetch
            # waits a second, which a task slower than the fetcher hits on every refill
            "fetch.queue.backoff.ms": 20, **overrides})
        config = self.setup.connector_config
        topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
        regex = config.get("topics.regex", "").strip()
        consumer.subscribe(topics or ["^" + regex.lstrip("^")], on_assign=self._on_assign,
                           on_revoke=self._on_revoke)
        return consumer

    def run(self) -> None:
        task = self.task
        assert isinstance(task, SinkTask)
        task.initialize(SinkTaskContext(self.setup.config))
        task.start(self.setup.config)
        if self.dlq_topic:
            self._ensure_dlq()
        self.consumer = self._consumer()
        self.setup.report("PAUSED" if self.paused else "RUNNING", None)
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                batch = self._consume_unless_paused()
                records = self._convert(batch)
                if records:
                    task.put(records)
                    self.metrics.record(len(records))
                if time.monotonic() - last_commit > self.setup.flush_interval_s:
                    self._commit(task)
                    last_commit = time.monotonic()
            self._commit(task)
        except BaseException:
            self.failing = True  # nothing of the failed batch is flushed or committed
            raise
        finally:
            self.consumer.close()  # runs _on_revoke, which commits unless failing
            task.stop()
        self.setup.report("UNASSIGNED", None)

    def _consume_unless_paused(self) -> list[Any]:
        """A batch, or nothing while paused (the consumer keeps polling, so it stays in its
        group, but its partitions are paused)."""
        if self.paused or self.paused_partitions:
            assignment = self.consumer.assignment()
            if self.paused:
                # again each time: a rebalance may have assigned partitions since
                self.consumer.pause(assignment)
                self.paused_partitions = True
            else:  # only once after pausing: a resume restarts the partition's fetcher
                self.consumer.resume(assignment)
                self.paused_partitions = False
        self.failing = False
        return list(self.consumer.consume(1000, 0.5))

    def _convert(self, batch: list[Any]) -> list[SinkRecord]:
        """The batch's records, built column by column: each message method is mapped over
        the batch in C, the converters take whole columns (`to_connect_batch`), and the
        records are tuples made from the columns, so the Python work per record is a few
        C calls (bench/README.md). A batch with a record that cannot be converted goes
        through `_convert_each`, which sends just that record to the DLQ."""
        if any(map(Message.error, batch)):
            batch = self._drop_errors(batch)
        if not batch:
            return []
        topics = list(map(Message.topic, batch))
        partitions = list(map(Message.partition, batch))
        offsets = list(map(Message.offset, batch))
        # a partition's messages come in order: its last offset in the batch wins
        self.consumed.update(zip(zip(topics, partitions, strict=True), offsets, strict=True))
        try:
            key_schemas, keys = self.setup.key_converter.to_connect_batch(
                topics, list(map(Message.key, batch)))
            schemas, values = self.setup.value_converter.to_connect_batch(
                topics, list(map(Message.value, batch)))
        except DataException:
            return self._convert_each(batch)
        timestamps = list(map(_SECOND, map(Message.timestamp, batch)))
        headers: list[Any] = list(map(Message.headers, batch))
        headers = ([tuple(h) if h else () for h in headers] if any(headers)
                   else [()] * len(batch))
        return list(map(_new_sink_record, zip(topics, partitions, offsets, keys, key_schemas,
                                              values, schemas, timestamps, headers,
                                              strict=True)))

    def _drop_errors(self, batch: list[Any]) -> list[Any]:
        good = []
        for msg in batch:
            error = msg.error()
            if error is None:
                good.append(msg)
            elif error.fatal():
                raise KafkaException(error)
            else:
                log.info("sink %s: %s", self.setup.connector, error)  # e.g. no topic yet
        return good

    def _convert_each(self, batch: list[Any]) -> list[SinkRecord]:
        records = []
        key_converter = self.setup.key_converter.to_connect_data
        value_converter = self.setup.value_converter.to_connect_data
        for msg in batch:
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            try:
                key_schema, key = key_converter(topic, msg.key())
                schema, value = value_converter(topic, msg.value())
            except DataException as exc:
                self._to_dlq(msg, exc)
                continue
            headers = msg.headers()
            records.append(SinkRecord(topic, partition, offset, key, key_schema, value, schema,
                                      msg.timestamp()[1], tuple(headers) if headers else ()))
        return records

    def _to_dlq(self, msg: Any, exc: DataException) -> None:
        self.tolerate(exc, f"{msg.topic()}-{msg.partition()}@{msg.offset()}")
        if self.dlq is None:
            return
        headers = []
        if self.dlq_headers:
            headers = [("__connect.errors.topic", msg.topic().encode()),
                       ("__connect.errors.partition", str(msg.partition()).encode()),
                       ("__connect.errors.offset", str(msg.offset()).encode()),
                       ("__connect.errors.connector.name", self.setup.connector.encode()),
                       ("__connect.errors.task.id", str(self.setup.task_id).encode()),
                       ("__connect.errors.stage", b"VALUE_CONVERTER"),
                       ("__connect.errors.exception.class.name",
                        b"org.apache.kafka.connect.errors.DataException"),
                       ("__connect.errors.exception.message", str(exc).encode())]
        self.dlq.produce(self.dlq_topic, key=msg.key(), value=msg.value(), headers=headers)
        self.dlq.poll(0)

    def _ensure_dlq(self) -> None:
        replication = int(self.setup.connector_config.get(
            "errors.deadletterqueue.topic.replication.factor", "3"))
        admin = AdminClient(self.setup.client_settings)
        future = admin.create_topics([NewTopic(self.dlq_topic, 1, replication)])[self.dlq_topic]
        try:
            future.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        self.dlq = Producer({**self.setup.client_settings, "acks": "all"})

    def _commit(self, task: SinkTask, only: list[tuple[str, int]] | None = None) -> None:
        # consumed holds the last offset read; Kafka's commit is the next one to read
        offsets = {tp: o + 1 for tp, o in self.consumed.items() if only is None or tp in only}
        if not offsets:
            return
        task.flush(offsets)
        if self.dlq is not None:
            self.dlq.flush(30)
        try:
            self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in
                                          offsets.items()], asynchronous=False)
        except KafkaException as exc:  # a rebalance took the partitions: they come again
            log.warning("sink %s: commit failed: %s", self.setup.connector, exc)
        for tp in offsets:
            self.consumed.pop(tp, None)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.assign(partitions)  # done here, so that the pause below holds
        if self.paused:  # assigned while paused: not one record until resumed
            consumer.pause(partitions)
            self.paused_partitions = True

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        task = self.task
        assert isinstance(task, SinkTask)
        if not self.failing:
            self._commit(task, [(p.topic, p.partition) for p in partitions])


def setup_converters(props: Mapping[str, str], worker_props: Mapping[str, str]
                     ) -> tuple[Converter, Converter]:
    from connect.converters import build_converter
    return (build_converter(props, "key.converter", True, worker_props),
            build_converter(props, "value.converter", False, worker_props))
