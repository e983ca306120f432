"""``df.write`` / ``writeStream.format("millrace-kafka")``: Spark's Kafka sink, and exactly-once.

Rows carry Spark's sink columns: ``value`` (required), ``key``, ``headers``, ``topic``,
``partition``. Each Spark task produces its rows with its own confluent-kafka producer.

**Exactly-once** (``deliveryGuarantee=exactly-once``, the default for ``writeStream``): the
task of partition *p* in micro-batch *b* of query *q* writes in one Kafka transaction whose
``transactional.id`` is ``millrace-sink-<q>-<p>``, and commits in the same transaction the
offset *b*+1 of ``_millrace-sink-batches``-0 for the consumer group of that same name, as a
marker. A replay of *b* (after a crash, or a retried task) first calls ``init_transactions``,
which fences any earlier producer of that id and aborts its open transaction; then it reads
the marker (stable offsets only): when it is past *b*, the task's rows are already in Kafka
and it writes nothing. So each row is in the output once for ``read_committed`` readers.
The query id is Spark's, kept in the checkpoint, so it survives restarts.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from sparkkafka.options import OptionError, SinkOptions

log = logging.getLogger(__name__)

MARKER_TOPIC = "_millrace-sink-batches"
TRANSACTION_PREFIX = "millrace-sink"
_TIMEOUT_S = 60.0
# Spark sets these local properties on every task of a micro-batch.
_BATCH_ID = "streaming.sql.batchId"
_QUERY_ID = "sql.streaming.queryId"
# Settings a marker consumer needs from the producer's: where the cluster is and how to log in.
_CONNECTION_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.id")


@dataclass
class SinkCommit(WriterCommitMessage):
    partition: int
    rows: int
    skipped: bool = False  # a replayed batch this task had already written


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Refuse, on the driver, a DataFrame the sink cannot write, naming the column."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    binary_or_string = (BinaryType(), StringType())
    header = StructType().add("key", StringType()).add("value", BinaryType())
    expected: dict[str, tuple[DataType, ...]] = {
        "value": binary_or_string,
        "key": binary_or_string,
        "topic": (StringType(),),
        "partition": (IntegerType(),),
        "headers": (ArrayType(header, True), ArrayType(header, False)),
    }
    if "value" not in types:
        raise OptionError("the sink needs a value column (STRING or BINARY)")
    if options.topic is None and "topic" not in types:
        raise OptionError("give option topic or a topic column")
    for name, allowed in expected.items():
        if name in types and not _one_of(types[name], allowed):
            wanted = " or ".join(t.simpleString() for t in allowed)
            raise OptionError(f"column {name} must be {wanted}")


def _one_of(actual: DataType, allowed: tuple[DataType, ...]) -> bool:
    # Struct fields' nullability differs by producer of the DataFrame; compare the shape.
    return any(actual.simpleString() == a.simpleString() for a in allowed)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: each task produces its rows (idempotent producer, at least once)."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_at_least_once(self.options, iterator)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options
        if options.delivery_guarantee == "exactly-once":
            create_marker_topic(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        if self.options.delivery_guarantee == "exactly-once":
            return write_exactly_once(self.options, iterator)
        return write_at_least_once(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, SinkCommit)]
        skipped = [m.partition for m in done if m.skipped]
        if skipped:
            log.info("batch %d: tasks %s had written it before a restart", batchId, skipped)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: a failed task aborted its own transaction, and the replay fences
        whatever a task that never reported left open."""


def write_at_least_once(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
    from pyspark import TaskContext

    errors: list[Any] = []
    producer = _producer(options, {"enable.idempotence": "true"}, errors.append)
    rows = produce_rows(producer, batches, options.topic)
    producer.flush()
    if errors:
        raise RuntimeError(f"{len(errors)} records were not written; the first: {errors[0]}")
    context = TaskContext.get()
    return SinkCommit(context.partitionId() if context else 0, rows)


def write_exactly_once(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from pyspark import TaskContext

    context = TaskContext.get()
    batch_id = context.getLocalProperty(_BATCH_ID) if context else None
    query_id = context.getLocalProperty(_QUERY_ID) if context else None
    if context is None or batch_id is None or query_id is None:
        raise OptionError("deliveryGuarantee=exactly-once is for writeStream micro-batches")
    part, batch = context.partitionId(), int(batch_id)
    name = f"{TRANSACTION_PREFIX}-{query_id}-{part}"
    producer = _producer(options, {"transactional.id": name}, None)
    producer.init_transactions(_TIMEOUT_S)  # fences an earlier attempt, aborts its transaction
    connection = {k: v for k, v in options.client.items() if k.startswith(_CONNECTION_PREFIXES)}
    marker = Consumer(
        {
            **connection,
            "group.id": name,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        (done,) = marker.committed([TopicPartition(MARKER_TOPIC, 0)], timeout=_TIMEOUT_S)
        if done.offset > batch:
            for _ in batches:  # Spark expects the input consumed
                pass
            return SinkCommit(part, 0, skipped=True)
        producer.begin_transaction()
        try:
            rows = produce_rows(producer, batches, options.topic)
            producer.send_offsets_to_transaction(
                [TopicPartition(MARKER_TOPIC, 0, batch + 1)],
                marker.consumer_group_metadata(),
                _TIMEOUT_S,
            )
            producer.commit_transaction(_TIMEOUT_S)
        except BaseException:
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(_TIMEOUT_S)
            raise
        return SinkCommit(part, rows)
    finally:
        marker.close()


def create_marker_topic(options: SinkOptions) -> None:
    """The topic whose offsets mark written batches; no record is ever produced to it."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    connection = {k: v for k, v in options.client.items() if k.startswith(_CONNECTION_PREFIXES)}
    admin = AdminClient(connection)
    future = admin.create_topics([NewTopic(MARKER_TOPIC, 1)], request_timeout=_TIMEOUT_S)
    try:
        future[MARKER_TOPIC].result()
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _producer(
    options: SinkOptions, owned: dict[str, str], on_error: Callable[[Any], None] | None
) -> Any:
    from confluent_kafka import Producer

    def delivered(error: Any, _message: Any) -> None:
        if error is not None and on_error is not None:
            on_error(error)

    # Java's partitioner (murmur2 of the key), as Spark's sink uses: the same key lands on the
    # same partition whichever client wrote it.
    settings: dict[str, Any] = {"partitioner": "murmur2_random", **options.client, **owned}
    if on_error is not None:
        settings["on_delivery"] = delivered
    return Producer(settings)


def produce_rows(producer: Any, batches: Iterator[pa.RecordBatch], topic: str | None) -> int:
    """Produce every row; the ``topic`` option wins over a topic column (as in Spark)."""
    rows = 0
    for batch in batches:
        columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        n = batch.num_rows
        values = columns["value"].to_pylist()
        keys = columns["key"].to_pylist() if "key" in columns else [None] * n
        topics = [topic] * n if topic else columns["topic"].to_pylist()
        parts = columns["partition"].to_pylist() if "partition" in columns else [None] * n
        headers = columns["headers"].to_pylist() if "headers" in columns else [None] * n
        for i in range(n):
            if topics[i] is None:
                raise OptionError("a row has a null topic and no topic option is set")
            row_headers = headers[i]
            hs = [(h["key"], h["value"]) for h in row_headers] if row_headers else None
            _produce(producer, topics[i], values[i], keys[i], parts[i], hs)
        rows += n
        producer.poll(0)
    return rows


def _produce(
    producer: Any, topic: str, value: Any, key: Any, partition: int | None, headers: Any
) -> None:
    args: dict[str, Any] = {"key": key, "headers": headers}
    if partition is not None:
        args["partition"] = partition
    while True:
        try:
            producer.produce(topic, value, **args)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.05)
