"""A PySpark Python Data Source that reads Kafka topics over the wire with confluent-kafka.

``spark.read.format("millrace-kafka")`` with the options of Spark's own Kafka source (see
``kafka_options.py`` and the README). Spark reserves the name ``kafka`` for its Maven connector,
which cannot be installed here, hence the prefix.

On the driver, :meth:`KafkaReader.partitions` lists the matching topic-partitions, resolves
the start and end bounds (earliest/latest, per-partition JSON, or timestamps) with one batched
ListOffsets per kind, and cuts each range into slices of at most ``maxRecordsPerPartition``;
each slice is one Spark task. On an executor, :meth:`KafkaReader.read` assigns a consumer to its
slice and yields Arrow record batches until the slice's end offset. Nothing is committed: the
source owns its consumer group id and never joins a group.

With ``endingOffsetsAtRead``, each partition's last slice is open-ended: its task asks for the
latest offset when it starts reading. Spark plans a Python data source's batch partitions once
per query, yet runs their tasks again for every micro-batch that reads them; so the static side
of a stream-static join (the stream queries' ``<view>_table``) is read as it is at each batch,
not as it was when the query started.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sparkkafka.avro_columns import AvroError
from sparkkafka.offsets import TP
from sparkkafka.options import (
    EARLIEST,
    LATEST,
    VALUE_FORMATS,
    OffsetRange,
    OptionError,
    SourceOptions,
    plan_slices,
)

# Spark's Kafka source's columns. Built as types, not DDL: parsing DDL needs a SparkContext,
# which the Python worker that asks a data source for its schema does not have.
COLUMNS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
HEADERS = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)
BATCH_ROWS = 8192
_ADMIN_TIMEOUT_S = 30.0
# confluent-kafka's timestamp kinds mapped to Kafka's TimestampType ids, as Spark shows them.
_TIMESTAMP_TYPES = {0: -1, 1: 0, 2: 1}


@dataclass(frozen=True)
class KafkaSlice(InputPartition):
    """One Spark input partition: offsets [start, end) of a topic-partition; with
    ``to_latest``, [start, the latest offset when the task reads), at least to ``end``."""

    topic: str
    partition: int
    start: int
    end: int
    to_latest: bool = False


class KafkaReader(DataSourceReader):
    def __init__(self, options: SourceOptions, decoders: Mapping[str, Any] | None = None) -> None:
        self.options = options
        # column -> formats.RecordDecoder, when a column is decoded through the registry
        self.decoders = dict(decoders or {})

    def partitions(self) -> list[KafkaSlice]:
        ranges = resolve_ranges(self.options)
        slices = plan_slices(
            ranges, self.options.max_records_per_partition, self.options.min_partitions
        )
        planned = (open_ended(ranges, slices) if self.options.ending_at_read
                   else [KafkaSlice(s.topic, s.partition, s.start, s.end) for s in slices])
        # Spark needs one partition to run; an empty slice yields nothing.
        return planned or [KafkaSlice("", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch | tuple[Any, ...]]:
        """Arrow batches of raw records, or rows when a column is decoded (the nested types
        make Arrow no faster there)."""
        assert isinstance(partition, KafkaSlice)
        if partition.to_latest:
            partition = extended_to_latest(self.options, partition)
        if partition.end <= partition.start:
            return
        if self.decoders:
            yield from _decoded_rows(self.options, partition, self.decoders)
        else:
            yield from read_slice(self.options, partition)


def open_ended(ranges: list[OffsetRange], slices: list[OffsetRange]) -> list[KafkaSlice]:
    """endingOffsetsAtRead: the slices, each partition's last one reading on to the latest
    offset when its task runs; a partition with no record yet gets an empty one, so records
    produced after planning are still read."""
    by_partition: dict[TP, list[OffsetRange]] = {}
    for s in slices:
        by_partition.setdefault((s.topic, s.partition), []).append(s)
    result = []
    for r in ranges:
        own = by_partition.get((r.topic, r.partition)) or [
            OffsetRange(r.topic, r.partition, r.start, r.start)]
        result += [KafkaSlice(s.topic, s.partition, s.start, s.end) for s in own[:-1]]
        last = own[-1]
        result.append(KafkaSlice(last.topic, last.partition, last.start, last.end, True))
    return result


def extended_to_latest(opts: SourceOptions, part: KafkaSlice) -> KafkaSlice:
    """The open-ended slice closed at its partition's latest offset now (never shorter than
    planned: a latest offset does not go back)."""
    tp = (part.topic, part.partition)
    latest = list_offsets(opts, admin_client(opts), {tp: "latest"})[tp]
    return dataclasses.replace(part, end=max(part.end, latest), to_latest=False)


def resolve_ranges(opts: SourceOptions) -> list[OffsetRange]:
    """The [start, end) offsets of every matching topic-partition, from the cluster."""
    admin = admin_client(opts)
    tps = matching_partitions(opts, admin)
    if not tps:
        return []
    earliest = list_offsets(opts, admin, dict.fromkeys(tps, "earliest"))
    latest = list_offsets(opts, admin, dict.fromkeys(tps, "latest"))
    starts = _starts(opts, admin, tps, earliest, latest)
    ends = _ends(opts, admin, tps, latest)
    ranges = []
    for tp in tps:
        start, end = starts[tp], ends[tp]
        if start > end:
            raise OptionError(
                f"{tp[0]}-{tp[1]}: the starting offset {start} is after the ending offset {end}"
            )
        ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return ranges


def starting_offsets(opts: SourceOptions, admin: Any) -> dict[TP, int]:
    """Where a new streaming query starts in each matching partition (startingOffsets,
    startingTimestamp and friends, resolved to offsets for the checkpoint)."""
    tps = matching_partitions(opts, admin)
    if not tps:
        return {}
    earliest = list_offsets(opts, admin, dict.fromkeys(tps, "earliest"))
    latest = list_offsets(opts, admin, dict.fromkeys(tps, "latest"))
    return _starts(opts, admin, tps, earliest, latest)


def admin_client(opts: SourceOptions) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(dict(opts.client))


def topic_partitions(client: Mapping[str, str], topics: list[str]) -> dict[str, list[int]]:
    """Every partition id of each named topic, from the cluster's metadata (a topic the
    cluster does not have maps to no partitions): what a read of the records alone cannot
    tell, the partitions holding none."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(dict(client)).list_topics(timeout=_ADMIN_TIMEOUT_S)
    found = {t: sorted(metadata.topics[t].partitions) for t in topics if t in metadata.topics}
    return {t: found.get(t, []) for t in topics}


def matching_partitions(opts: SourceOptions, admin: Any) -> list[TP]:
    """The topic-partitions the options select, as the cluster's metadata has them now."""
    metadata = admin.list_topics(timeout=_ADMIN_TIMEOUT_S)
    return _topic_partitions(opts, {t: list(m.partitions) for t, m in metadata.topics.items()})


def _topic_partitions(opts: SourceOptions, topics: Mapping[str, list[int]]) -> list[TP]:
    if opts.assign is not None:
        missing = [
            f"{t}-{p}" for t, ps in opts.assign.items() for p in ps if p not in topics.get(t, [])
        ]
        if missing:
            raise OptionError(f"assign names partitions that do not exist: {', '.join(missing)}")
        return sorted((t, p) for t, ps in opts.assign.items() for p in ps)
    return sorted(
        (t, p)
        for t, ps in topics.items()
        if not t.startswith("__") and opts.topic_matches(t)
        for p in ps
    )


def _starts(
    opts: SourceOptions, admin: Any, tps: list[TP], earliest: dict[TP, int], latest: dict[TP, int]
) -> dict[TP, int]:
    by_time = _timestamps(opts.starting_timestamp, opts.starting_by_timestamp, tps, "starting")
    if by_time is not None:
        found = list_offsets(opts, admin, by_time)
        if opts.timestamp_strategy == "error":
            late = [f"{t}-{p}" for (t, p), o in found.items() if o < 0]
            if late:
                raise OptionError(
                    "no record at or after the starting timestamp in "
                    f"{', '.join(late)} (startingOffsetsByTimestampStrategy=error)"
                )
        return {tp: latest[tp] if o < 0 else o for tp, o in found.items()}
    specific = _specific(opts.starting, tps, earliest, latest, "startingOffsets")
    for tp, offset in specific.items():
        if offset < earliest[tp]:
            if opts.fail_on_data_loss:
                raise OptionError(
                    f"{tp[0]}-{tp[1]}: startingOffsets {offset} is before the log start offset "
                    f"{earliest[tp]}; those records were deleted (set failOnDataLoss=false to "
                    "start at the earliest)"
                )
            specific[tp] = earliest[tp]
    return specific


def _ends(opts: SourceOptions, admin: Any, tps: list[TP], latest: dict[TP, int]) -> dict[TP, int]:
    by_time = _timestamps(opts.ending_timestamp, opts.ending_by_timestamp, tps, "ending")
    if by_time is not None:
        found = list_offsets(opts, admin, by_time)
        return {tp: latest[tp] if o < 0 else o for tp, o in found.items()}
    return _specific(opts.ending, tps, {}, latest, "endingOffsets")


def _timestamps(
    everywhere: int | None, per_partition: Any, tps: list[TP], what: str
) -> dict[TP, int] | None:
    if everywhere is not None:  # takes precedence, as in Spark
        return dict.fromkeys(tps, everywhere)
    if per_partition is None:
        return None
    return _require_all(per_partition, tps, f"{what}OffsetsByTimestamp")


def _specific(
    bound: Any, tps: list[TP], earliest: dict[TP, int], latest: dict[TP, int], name: str
) -> dict[TP, int]:
    if bound == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if bound == "latest":
        return {tp: latest[tp] for tp in tps}
    chosen = _require_all(bound, tps, name)
    result = {}
    for tp, offset in chosen.items():
        value = {EARLIEST: earliest.get(tp), LATEST: latest[tp]}.get(offset, offset)
        assert value is not None
        if value > latest[tp]:
            raise OptionError(
                f"{tp[0]}-{tp[1]}: {name} {value} is past the end offset {latest[tp]}"
            )
        result[tp] = value
    return result


def _require_all(
    by_topic: Mapping[str, Mapping[int, int]], tps: list[TP], name: str
) -> dict[TP, int]:
    given = {(t, p): o for t, ps in by_topic.items() for p, o in ps.items()}
    missing = [f"{t}-{p}" for t, p in tps if (t, p) not in given]
    if missing:
        raise OptionError(
            f"{name} must name every partition read (use -1 for latest, -2 for earliest); "
            f"missing {', '.join(missing)}"
        )
    return {tp: given[tp] for tp in tps}


def list_offsets(
    opts: SourceOptions, admin: Any, specs: Mapping[TP, str | int], skip_unknown: bool = False
) -> dict[TP, int]:
    """One batched ListOffsets: "earliest", "latest" or a timestamp per partition. "latest" is
    the last stable offset when the consumer reads committed (librdkafka's default), so a read
    never waits on an open transaction it cannot see. ``skip_unknown`` leaves out partitions
    the cluster no longer has instead of failing."""
    from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    def spec(kind: str | int) -> Any:
        if kind == "earliest":
            return OffsetSpec.earliest()
        if kind == "latest":
            return OffsetSpec.latest()
        return OffsetSpec.for_timestamp(int(kind))

    committed = opts.client.get("isolation.level", "read_committed") == "read_committed"
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    request = {TopicPartition(t, p): spec(kind) for (t, p), kind in specs.items()}
    if not request:
        return {}
    futures = admin.list_offsets(request, isolation_level=level, request_timeout=_ADMIN_TIMEOUT_S)
    found = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = future.result().offset
        except KafkaException as exc:
            if not skip_unknown or exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return found


def read_slice(opts: SourceOptions, part: KafkaSlice) -> Iterator[pa.RecordBatch]:
    """Records part.start..part.end-1 as Arrow batches, whatever the batches' compression."""
    for chunk in _message_chunks(opts, part):
        yield record_batch(chunk, part, opts.include_headers)


def _decoded_rows(
    opts: SourceOptions, part: KafkaSlice, decoders: Mapping[str, Any]
) -> Iterator[tuple[Any, ...]]:
    from sparkkafka.formats import SchemaError

    decode_key, decode_value = decoders.get("key", _as_is), decoders.get("value", _as_is)
    for chunk in _message_chunks(opts, part):
        for m in chunk:
            try:
                key, value = decode_key(m.key()), decode_value(m.value())
            except (SchemaError, AvroError) as exc:
                raise SchemaError(
                    f"{m.topic()}-{m.partition()} offset {m.offset()}: {exc}"
                ) from exc
            kind, ts = m.timestamp()
            at = datetime.fromtimestamp(ts / 1000, UTC)
            row = (key, value, m.topic(), m.partition(), m.offset(), at)
            headers = [(k, v) for k, v in m.headers() or []]
            extra = (_TIMESTAMP_TYPES.get(kind, -1), headers)
            yield row + (extra if opts.include_headers else extra[:1])


def _as_is(raw: bytes | None) -> bytes | None:
    return raw


def _message_chunks(opts: SourceOptions, part: KafkaSlice) -> Iterator[list[Any]]:
    """The slice's messages in chunks of at most BATCH_ROWS, in offset order."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            **opts.client,
            "group.id": opts.group_id or f"{opts.group_id_prefix}-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "error" if opts.fail_on_data_loss else "earliest",
            "enable.partition.eof": False,
        }
    )
    try:
        consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
        position = part.start
        deadline = time.monotonic() + opts.poll_timeout_ms / 1000
        while position < part.end:
            wanted = min(BATCH_ROWS, part.end - position)
            messages = consumer.consume(num_messages=wanted, timeout=1)
            if not messages:
                # Transaction markers and compacted gaps have no record: ask where we are.
                position = max(position, _position(consumer, part))
                if position < part.end and time.monotonic() > deadline:
                    raise TimeoutError(
                        f"no record from {part.topic}-{part.partition} at offset {position} within "
                        f"kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}"
                    )
                continue
            deadline = time.monotonic() + opts.poll_timeout_ms / 1000
            failed = next((m for m in messages if m.error()), None)
            if failed is not None:
                raise KafkaException(failed.error())
            if messages[-1].offset() >= part.end:  # read past the slice: keep its part
                messages = [m for m in messages if m.offset() < part.end]
                position = part.end
            else:
                position = messages[-1].offset() + 1
            if messages:
                yield messages
    finally:
        consumer.close()


def _position(consumer: Any, part: KafkaSlice) -> int:
    from confluent_kafka import TopicPartition

    (tp,) = consumer.position([TopicPartition(part.topic, part.partition)])
    return int(tp.offset)


_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def record_batch(chunk: list[Any], part: KafkaSlice, include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch in the source's schema from a chunk of one partition's messages.

    Column by column with comprehensions, and topic and partition repeated from the slice:
    per-record method calls are the read's main cost after librdkafka's own."""
    n = len(chunk)
    stamps = [m.timestamp() for m in chunk]
    arrays = [
        pa.array([m.key() for m in chunk], pa.binary()),
        pa.array([m.value() for m in chunk], pa.binary()),
        pa.array([part.topic] * n, pa.string()),
        pa.array([part.partition] * n, pa.int32()),
        pa.array([m.offset() for m in chunk], pa.int64()),
        pa.array([ts * 1000 for _, ts in stamps], pa.timestamp("us", tz="UTC")),
        pa.array([_TIMESTAMP_TYPES.get(kind, -1) for kind, _ in stamps], pa.int32()),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        headers = [[{"key": k, "value": v} for k, v in m.headers() or []] for m in chunk]
        arrays.append(pa.array(headers, _HEADERS_TYPE))
        names.append("headers")
    return pa.RecordBatch.from_arrays(arrays, names=names)


def registry_decoders(opts: SourceOptions) -> dict[str, Any]:
    """column -> a ``formats.RecordDecoder`` of the latest schema of its subject
    (``<topic>-key`` / ``<topic>-value``), which must be the same for every topic read."""
    from sparkkafka.formats import record_decoder
    from sparkkafka.schema_registry import Registry, RegistryClient

    formats = {
        "key": (opts.key_format, opts.key_message),
        "value": (opts.value_format, opts.value_message),
    }
    columns = {c: f for c, f in formats.items() if VALUE_FORMATS[f[0]] is not None}
    if not columns:
        return {}
    assert opts.schema_registry_url is not None
    access = Registry.from_config(opts.schema_registry)  # its login and CA too
    registry = RegistryClient.of(access)
    topics = sorted(_topics_read(opts))
    if not topics:
        raise OptionError("no topic matches, so there is no subject to take a schema from")
    found = {}
    for column, (fmt, message) in columns.items():
        ids = {t: registry.latest(f"{t}-{column}").id for t in topics}
        if len(set(ids.values())) > 1:
            raise OptionError(
                f"the topics' {column} subjects hold different schemas ({', '.join(topics)}); "
                "read them separately"
            )
        found[column] = record_decoder(
            access,
            f"{topics[0]}-{column}",
            also_subjects=tuple(f"{t}-{column}" for t in topics[1:]),
            message=message,
            mode=opts.decode_mode,
            expected_type=VALUE_FORMATS[fmt],
        )
    return found


def _topics_read(opts: SourceOptions) -> set[str]:
    if opts.subscribe:
        return set(opts.subscribe)
    if opts.assign is not None:
        return set(opts.assign)
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(dict(opts.client)).list_topics(timeout=_ADMIN_TIMEOUT_S)
    return {t for t in metadata.topics if not t.startswith("__") and opts.topic_matches(t)}
