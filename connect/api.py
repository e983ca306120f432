"""The Python connector API: what a connector module implements, modelled on Kafka's
`org.apache.kafka.connect.{connector,source,sink}` interfaces (connect/README.md shows a
whole connector).

A connector (`SourceConnector` or `SinkConnector`) runs once per connector on one worker:
it validates its configuration and splits the work into task configs. Tasks
(`SourceTask`, `SinkTask`) do the copying, each on a thread of its own on some worker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from connect.configdef import ConfigDef, ConfigValue


class ConnectException(Exception):
    """Kafka's ConnectException: the task or connector cannot go on (it turns FAILED)."""


class RetriableException(ConnectException):
    """A transient problem: the framework calls poll()/put() again."""


class DataException(ConnectException):
    """A record that cannot be converted: subject to errors.tolerance."""


@dataclass(frozen=True)
class Schema:
    """A Connect schema, as JsonConverter writes it (`{"type": "string", "optional": false}`).
    Types: int8, int16, int32, int64, float32, float64, boolean, string, bytes, array, map,
    struct. A named primitive with a version and parameters is a logical type
    (connect/logical.py: Decimal, Date, Time, Timestamp)."""
    type: str
    optional: bool = False
    name: str | None = None
    fields: tuple[tuple[str, Schema], ...] = ()
    items: Schema | None = None
    version: int | None = None
    parameters: tuple[tuple[str, str], ...] = ()  # a tuple, so that schemas stay hashable

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "optional": self.optional}
        if self.name:
            out["name"] = self.name
        if self.version is not None:
            out["version"] = self.version
        if self.parameters:
            out["parameters"] = dict(self.parameters)
        if self.type == "struct":
            out["fields"] = [{**s.as_json(), "field": n} for n, s in self.fields]
        if self.items is not None:
            out["items"] = self.items.as_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schema:
        fields = tuple((f["field"], cls.from_json(f)) for f in data.get("fields") or ())
        items = cls.from_json(data["items"]) if data.get("items") else None
        version = data.get("version")
        parameters = tuple((str(k), str(v)) for k, v in (data.get("parameters") or {}).items())
        return cls(str(data["type"]), bool(data.get("optional", False)), data.get("name"),
                   fields, items, int(version) if version is not None else None, parameters)


STRING_SCHEMA = Schema("string")
OPTIONAL_STRING_SCHEMA = Schema("string", optional=True)
BYTES_SCHEMA = Schema("bytes")
INT64_SCHEMA = Schema("int64")


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is slower per record
class SourceRecord:
    """A record a source task read: where it came from (`source_partition`, and
    `source_offset` to resume after it), and where it goes."""
    source_partition: Mapping[str, Any]
    source_offset: Mapping[str, Any]
    topic: str
    value: Any
    value_schema: Schema | None = None
    key: Any = None
    key_schema: Schema | None = None
    partition: int | None = None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


class SinkRecord(NamedTuple):
    """A record a sink task receives, already converted. A named tuple, not a dataclass:
    the runner builds a batch's records with `tuple.__new__` over columns it took from the
    consumer's messages in C loops, which costs a fraction of a Python `__init__` per
    record (bench/connect_bench.py; a sink's Python work per record is its throughput)."""
    topic: str
    kafka_partition: int
    kafka_offset: int
    key: Any
    key_schema: Schema | None
    value: Any
    value_schema: Schema | None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


class OffsetStorageReader:
    """A source task's view of the offsets its connector committed."""

    def __init__(self, offsets: Mapping[str, Any]) -> None:
        self._offsets = offsets  # canonical JSON of the partition -> offset

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        from connect.storage import partition_key  # the one canonical form
        found = self._offsets.get(partition_key(partition))
        return dict(found) if found is not None else None


@dataclass
class SourceTaskContext:
    offset_storage_reader: OffsetStorageReader
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass
class SinkTaskContext:
    configs: Mapping[str, str] = field(default_factory=dict)
    rewind: dict[tuple[str, int], int] = field(default_factory=dict)

    def offset(self, topic: str, partition: int, offset: int) -> None:
        """Ask the framework to consume topic-partition from `offset` next."""
        self.rewind[(topic, partition)] = offset


@dataclass
class ConnectorContext:
    """What a running connector may ask of the framework (Kafka's ConnectorContext): new task
    configs (its work changed, e.g. a new topic matched), or to fail with `exc`'s trace."""
    request_task_reconfiguration: Callable[[], None] = lambda: None
    raise_error: Callable[[BaseException], None] = lambda exc: None


class Task(ABC):
    def version(self) -> str:
        return "1.0"

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...


class SourceTask(Task):
    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """Records read since the last call, or None; may block briefly (about a second)."""

    def commit(self) -> None:
        """The offsets of the records returned so far are durable."""

    def commit_record(self, record: SourceRecord, partition: int, offset: int) -> None:
        """`record` was acknowledged by Kafka at `partition`/`offset` of its topic (Kafka's
        commitRecord with its RecordMetadata); called on the task's thread. Only tasks
        that override it get the calls."""


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abstractmethod
    def put(self, records: list[SinkRecord]) -> None: ...

    def flush(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Make everything put() so far durable; the framework then commits `offsets`."""

    def open(self, partitions: list[tuple[str, int]]) -> None: ...

    def close(self, partitions: list[tuple[str, int]]) -> None: ...


class Connector(ABC):
    # Converters taken before the worker's when the connector's config names none: a
    # connector that copies bytes as they are (MirrorMaker's) sets ByteArrayConverter.
    default_converters: Mapping[str, str] = {}
    context: ConnectorContext

    def version(self) -> str:
        return "1.0"

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    @abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abstractmethod
    def task_class(self) -> type[Task]: ...

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]: ...

    def stop(self) -> None:  # noqa: B027 - an optional hook: most connectors hold nothing
        """Release what start() took (nothing, unless the connector overrides it)."""

    @abstractmethod
    def config(self) -> ConfigDef: ...

    def validate(self, props: Mapping[str, str]) -> dict[str, ConfigValue]:
        return self.config().validate(props)


class SourceConnector(Connector):
    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        """True if the connector's tasks can be run exactly once (KIP-618); None: unknown."""
        return None


class SinkConnector(Connector):
    pass
