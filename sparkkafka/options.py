"""The Kafka Data Source's options, named and checked as Spark's own Kafka source names them.

Parsing is pure (no client, no Spark) so a bad option is refused on the driver, before any task
starts, with a message naming the option. :func:`plan_slices` turns resolved offset ranges into
the input partitions Spark runs in parallel.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2  # Spark's sentinels in the per-partition JSON
LATEST = -1
DEFAULT_MAX_RECORDS_PER_PARTITION = 500_000
DEFAULT_POLL_TIMEOUT_MS = 120_000
# Spark's Kafka source names the consumer groups it generates by these prefixes (groupIdPrefix).
BATCH_GROUP_ID_PREFIX = "spark-kafka-relation"
STREAM_GROUP_ID_PREFIX = "spark-kafka-source"
# Kafka client settings the source owns; a user setting them would break exact ranges.
# Spark refuses these too (the source decides them); kafka.group.id it accepts, and so do we.
_OWNED_SETTINGS = {"enable.auto.commit", "auto.offset.reset", "enable.partition.eof"}


class OptionError(ValueError):
    """An option the source cannot honour; the message names the option."""


# Topic -> partition -> offset (or EARLIEST/LATEST), or topic -> partition -> timestamp.
PartitionMap = dict[str, dict[int, int]]


# The schema.registry.* options: Confluent's registry client keys (schema_registry.CLIENT_KEYS,
# restated: this module imports no client)
REGISTRY_KEYS = ("url", "basic.auth.user.info", "basic.auth.credentials.source",
                 "ssl.ca.location")

# valueFormat / keyFormat: the registry's schema types by the names Spark users write.
VALUE_FORMATS = {"binary": None, "avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client: Mapping[str, str]  # kafka.-prefixed settings, prefix removed
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: Mapping[str, tuple[int, ...]] | None = None
    starting: str | PartitionMap = "earliest"
    ending: str | PartitionMap = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_by_timestamp: PartitionMap | None = None
    ending_by_timestamp: PartitionMap | None = None
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    value_format: str = "binary"  # or avro, jsonschema, protobuf
    key_format: str = "binary"
    schema_registry_url: str | None = None
    # every schema.registry.* option, prefix removed: Confluent's registry client keys
    # (url, basic.auth.user.info, ssl.ca.location; schema_registry.Registry.from_config)
    schema_registry: Mapping[str, str] = field(default_factory=dict)
    value_message: str | None = None  # valueProtobufMessage: the reader's message
    key_message: str | None = None
    decode_mode: str = "FAILFAST"  # mode: what a record that does not decode becomes
    group_id: str | None = None  # kafka.group.id: used as given, never joined nor committed
    group_id_prefix: str = BATCH_GROUP_ID_PREFIX  # groupIdPrefix, for generated group ids
    max_offsets_per_trigger: int | None = None
    # endingOffsetsAtRead: "latest" is resolved when a task reads, not when the read is planned
    ending_at_read: bool = False
    extra: Mapping[str, str] = field(default_factory=dict)

    def topic_matches(self, topic: str) -> bool:
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return self.assign is not None and topic in self.assign


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Spark's Kafka source options (case-insensitive names) as typed values."""
    opts = {k.lower(): v for k, v in options.items()}
    client = {k[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    if "bootstrap.servers" not in client:
        raise OptionError("option kafka.bootstrap.servers is required")
    owned = sorted(_OWNED_SETTINGS & set(client))
    if owned:
        raise OptionError(f"kafka.{owned[0]} is set by the source and cannot be given")
    group_id = client.pop("group.id", None)
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(strategies) != 1:
        raise OptionError("exactly one of subscribe, subscribePattern or assign must be given")
    fmt = {k: opts.get(k, "binary").lower() for k in ("valueformat", "keyformat")}
    fmt = {k: "jsonschema" if v == "json" else v for k, v in fmt.items()}
    for name, value in fmt.items():
        if value not in VALUE_FORMATS:
            raise OptionError(
                f"option {name} must be binary, avro, jsonschema or protobuf, got {value!r}"
            )
    if set(fmt.values()) != {"binary"} and not opts.get("schema.registry.url"):
        raise OptionError("decoding through the registry needs option schema.registry.url")
    registry = {k[len("schema.registry.") :]: v for k, v in opts.items()
                if k.startswith("schema.registry.")}
    if unknown := sorted(set(registry) - set(REGISTRY_KEYS)):
        raise OptionError(f"option schema.registry.{unknown[0]} is not one of "
                          f"{', '.join('schema.registry.' + k for k in REGISTRY_KEYS)}")
    mode = opts.get("mode", "FAILFAST").upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise OptionError(f"option mode must be FAILFAST or PERMISSIVE, got {mode!r}")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be error or latest")
    return SourceOptions(
        client=client,
        subscribe=_topics(opts.get("subscribe")),
        subscribe_pattern=_pattern(opts.get("subscribepattern")),
        assign=_assign(opts.get("assign")),
        starting=_bound(opts.get("startingoffsets", "earliest"), "startingOffsets"),
        ending=_bound(opts.get("endingoffsets", "latest"), "endingOffsets"),
        starting_timestamp=_int(opts.get("startingtimestamp"), "startingTimestamp", 0),
        ending_timestamp=_int(opts.get("endingtimestamp"), "endingTimestamp", 0),
        starting_by_timestamp=_partition_map(
            opts.get("startingoffsetsbytimestamp"), "startingOffsetsByTimestamp"
        ),
        ending_by_timestamp=_partition_map(
            opts.get("endingoffsetsbytimestamp"), "endingOffsetsByTimestamp"
        ),
        timestamp_strategy=strategy,
        fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        include_headers=_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        min_partitions=_int(opts.get("minpartitions"), "minPartitions", 1),
        max_records_per_partition=_int(
            opts.get("maxrecordsperpartition"), "maxRecordsPerPartition", 1
        )
        or DEFAULT_MAX_RECORDS_PER_PARTITION,
        poll_timeout_ms=_int(opts.get("kafkaconsumer.polltimeoutms"), "pollTimeoutMs", 1)
        or DEFAULT_POLL_TIMEOUT_MS,
        value_format=fmt["valueformat"],
        key_format=fmt["keyformat"],
        schema_registry_url=opts.get("schema.registry.url"),
        schema_registry=registry,
        value_message=opts.get("valueprotobufmessage"),
        key_message=opts.get("keyprotobufmessage"),
        decode_mode=mode,
        group_id=group_id,
        group_id_prefix=opts.get("groupidprefix", BATCH_GROUP_ID_PREFIX),
        max_offsets_per_trigger=_int(opts.get("maxoffsetspertrigger"), "maxOffsetsPerTrigger", 1),
        ending_at_read=_ending_at_read(opts),
    )


def _ending_at_read(opts: Mapping[str, str]) -> bool:
    """endingOffsetsAtRead (ours, not Spark's): only meaningful with the end at ``latest``."""
    at_read = _bool(opts.get("endingoffsetsatread", "false"), "endingOffsetsAtRead")
    timed = ("endingtimestamp", "endingoffsetsbytimestamp")
    if at_read and (opts.get("endingoffsets", "latest").strip().lower() != "latest"
                    or any(k in opts for k in timed)):
        raise OptionError("endingOffsetsAtRead needs endingOffsets latest (and no ending "
                          "timestamp): only the latest offset can move after planning")
    return at_read


# Options a streaming read refuses, as Spark's Kafka source does: a stream has no end.
_BATCH_ONLY = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp",
               "endingOffsetsAtRead")


def parse_stream_options(options: Mapping[str, str]) -> SourceOptions:
    """Spark's Kafka source options for ``readStream``."""
    given = {k.lower() for k in options}
    for name in _BATCH_ONLY:
        if name.lower() in given:
            raise OptionError(f"option {name} is for batch queries; a streaming read has no end")
    parsed = parse_options(options)
    if "groupidprefix" not in given:  # Spark names a stream's generated groups apart
        parsed = dataclasses.replace(parsed, group_id_prefix=STREAM_GROUP_ID_PREFIX)
    return parsed


DELIVERY_GUARANTEES = ("exactly-once", "at-least-once")
# Producer settings the sink owns in exactly-once mode.
_SINK_OWNED = {"transactional.id"}


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: Mapping[str, str]  # kafka.-prefixed producer settings, prefix removed
    topic: str | None = None  # wins over a topic column, as in Spark
    delivery_guarantee: str = "exactly-once"


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Spark's Kafka sink options (``kafka.*``, ``topic``) and ``deliveryGuarantee``."""
    opts = {k.lower(): v for k, v in options.items()}
    client = {k[len("kafka.") :]: v for k, v in options.items() if k.lower().startswith("kafka.")}
    if "bootstrap.servers" not in client:
        raise OptionError("option kafka.bootstrap.servers is required")
    owned = sorted(_SINK_OWNED & set(client))
    if owned:
        raise OptionError(f"kafka.{owned[0]} is set by the sink and cannot be given")
    guarantee = opts.get("deliveryguarantee", "exactly-once").lower()
    if guarantee not in DELIVERY_GUARANTEES:
        raise OptionError("deliveryGuarantee must be exactly-once or at-least-once")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic must name a topic")
    return SinkOptions(
        client=client,
        topic=topic.strip() if topic else None,
        delivery_guarantee=guarantee,
    )


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``start`` (inclusive) to ``end`` (exclusive) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def plan_slices(
    ranges: list[OffsetRange], max_records: int, min_partitions: int | None = None
) -> list[OffsetRange]:
    """Non-empty ranges cut so no slice exceeds ``max_records`` and, when ``min_partitions`` is
    larger than the count, the largest ranges are cut further (as Spark's ``minPartitions``)."""
    slices = [s for r in ranges if r.size > 0 for s in _cut(r, max_records)]
    if min_partitions and len(slices) < min_partitions:
        total = sum(s.size for s in slices)
        if total:
            per_slice = max(1, -(-total // min_partitions))
            slices = [s for r in slices for s in _cut(r, per_slice)]
    return slices


def _cut(r: OffsetRange, size: int) -> list[OffsetRange]:
    return [
        OffsetRange(r.topic, r.partition, lo, min(lo + size, r.end))
        for lo in range(r.start, r.end, size)
    ]


def _topics(text: str | None) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip()) if text else ()


def _pattern(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        re.compile(text)
    except re.error as exc:
        raise OptionError(f"subscribePattern is not a regular expression: {exc}") from exc
    return text


def _assign(text: str | None) -> dict[str, tuple[int, ...]] | None:
    if text is None:
        return None
    obj = _json(text, "assign")
    if not isinstance(obj, dict) or not all(
        isinstance(ps, list) and all(isinstance(p, int) for p in ps) for ps in obj.values()
    ):
        raise OptionError('assign must be JSON like {"topicA":[0,1],"topicB":[2,4]}')
    return {str(t): tuple(ps) for t, ps in obj.items()}


def _bound(text: str, name: str) -> str | PartitionMap:
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        if name == "endingOffsets" and word == "earliest":
            raise OptionError("endingOffsets cannot be earliest")
        return word
    parsed = _partition_map(text, name)
    assert parsed is not None
    if name == "endingOffsets" and any(
        o == EARLIEST for ps in parsed.values() for o in ps.values()
    ):
        raise OptionError("endingOffsets cannot use -2 (earliest) for a partition")
    return parsed


def _partition_map(text: str | None, name: str) -> PartitionMap | None:
    if text is None:
        return None
    obj = _json(text, name)
    shape = f'{name} must be earliest, latest or JSON like {{"topicA":{{"0":23,"1":-2}}}}'
    if not isinstance(obj, dict):
        raise OptionError(shape)
    result: PartitionMap = {}
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise OptionError(shape)
        try:
            result[str(topic)] = {int(p): _whole(v) for p, v in parts.items()}
        except (TypeError, ValueError) as exc:
            raise OptionError(shape) from exc
    return result


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(value)
    return value


def _json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON: {exc}") from exc


def _int(text: str | None, name: str, minimum: int) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError as exc:
        raise OptionError(f"option {name} must be a whole number, got {text!r}") from exc
    if value < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, got {value}")
    return value


def _bool(text: str, name: str) -> bool:
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise OptionError(f"option {name} must be true or false, got {text!r}")
