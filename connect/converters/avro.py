"""`io.confluent.connect.avro.AvroConverter`: Connect data as Avro in Confluent's wire
format, its schemas in the registry (fastavro writes and reads the binary encoding).

Connect schemas map to Avro as Confluent's AvroData maps them: int8 and int16 are Avro
`int` with `connect.type`, int32 `int`, int64 `long`, float32 `float`, float64 `double`,
a struct a record named by the schema's name (`ksql.users` is record `users` in namespace
`ksql`; an unnamed one `io.confluent.connect.avro.ConnectDefault`), an optional schema the
union `["null", T]` with default null, a map an Avro map (string keys). Connect's logical
types are Avro's: Decimal `bytes` with `logicalType: decimal` (its scale, and the
precision of `connect.decimal.precision`, else 64), Date `int` `date`, Time `int`
`time-millis`, Timestamp `long` `timestamp-millis`, each with `connect.name`,
`connect.version` and `connect.parameters` as Confluent writes them. Read back, an Avro
schema becomes the Connect schema it maps from (a plain Avro writer's logical types too);
enums read as strings, fixed as bytes. fastavro turns the logical types' values into
Python's Decimal, date, time and datetime and back.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import fastavro

from connect import logical
from connect.api import DataException, Schema

from .registry import Registered, RegistryConverter

NAMESPACE = "io.confluent.connect.avro"
PRIMITIVES = {"int32": "int", "int64": "long", "float32": "float", "float64": "double",
              "boolean": "boolean", "string": "string", "bytes": "bytes"}
# Confluent's AvroData: a Decimal's precision parameter, and what it writes without one
PRECISION = "connect.decimal.precision"
DEFAULT_PRECISION = 64
LOGICAL_TO_AVRO = {logical.DECIMAL: "decimal", logical.DATE: "date",
                   logical.TIME: "time-millis", logical.TIMESTAMP: "timestamp-millis"}
AVRO_TO_LOGICAL = {v: k for k, v in LOGICAL_TO_AVRO.items()}
FROM_AVRO = {"int": "int32", "long": "int64", "float": "float32", "double": "float64",
             "boolean": "boolean", "string": "string", "bytes": "bytes", "enum": "string",
             "fixed": "bytes"}


class _Names:
    """Unnamed structs get Confluent's ConnectDefault, numbered after the first."""

    def __init__(self) -> None:
        self.defaults = 0

    def record(self, schema: Schema) -> dict[str, Any]:
        if schema.name:
            namespace, _, name = schema.name.rpartition(".")
        else:
            self.defaults += 1
            namespace = NAMESPACE
            name = "ConnectDefault" + ("" if self.defaults == 1 else str(self.defaults))
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            record["namespace"] = namespace
        return record


def _logical_avro(schema: Schema) -> dict[str, Any]:
    """Connect's logical types as Confluent's AvroData writes them: Avro's logical type,
    with `connect.name`, `connect.version` and (a Decimal's) `connect.parameters`, so
    that both Avro readers and Connect read the type back."""
    avro: dict[str, Any] = {"type": PRIMITIVES[schema.type]}
    if schema.name == logical.DECIMAL:
        parameters = dict(schema.parameters)
        avro["scale"] = logical.scale_of(schema)
        avro["precision"] = int(parameters.get(PRECISION, DEFAULT_PRECISION))
    avro["connect.version"] = schema.version or 1
    if schema.parameters:
        avro["connect.parameters"] = dict(schema.parameters)
    avro["connect.name"] = schema.name
    avro["logicalType"] = LOGICAL_TO_AVRO[str(schema.name)]
    return avro


def to_avro(schema: Schema, names: _Names | None = None, nullable: bool = True) -> Any:
    """The Avro schema (as JSON data) of a Connect schema."""
    names = names or _Names()
    if schema.name in LOGICAL_TO_AVRO:
        avro: Any = _logical_avro(schema)
    elif schema.type in PRIMITIVES:
        avro = PRIMITIVES[schema.type]
    elif schema.type in ("int8", "int16"):
        avro = {"type": "int", "connect.type": schema.type}
    elif schema.type == "array":
        avro = {"type": "array", "items": to_avro(schema.items or Schema("string"), names)}
    elif schema.type == "map":
        avro = {"type": "map", "values": to_avro(schema.items or Schema("string"), names)}
    elif schema.type == "struct":
        avro = names.record(schema)
        avro["fields"] = [_field(n, s, names) for n, s in schema.fields]
        if schema.name:
            avro["connect.name"] = schema.name
    else:
        raise DataException(f"AvroConverter cannot write Connect type {schema.type}")
    return ["null", avro] if schema.optional and nullable else avro


def _field(name: str, schema: Schema, names: _Names) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "type": to_avro(schema, names)}
    if schema.optional:
        field["default"] = None
    return field


def from_avro(avro: Any, optional: bool = False, named: dict[str, Schema] | None = None,
              namespace: str = "") -> Schema:
    """The Connect schema of an Avro schema (its JSON); `named`: the named types so far."""
    named = {} if named is None else named
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise DataException(f"AvroConverter reads unions of null and one type, not {avro}")
        return from_avro(branches[0], len(branches) < len(avro), named, namespace)
    if isinstance(avro, str):
        found = named.get(avro) or named.get(f"{namespace}.{avro}")
        if found is not None:
            return Schema(found.type, optional, found.name, found.fields, found.items)
        avro = {"type": avro}
    kind = avro["type"]
    if isinstance(kind, dict | list):
        return from_avro(kind, optional, named, namespace)
    if kind == "record":
        return _record(avro, optional, named, namespace)
    if kind == "array":
        return Schema("array", optional, items=from_avro(avro["items"], False, named, namespace))
    if kind == "map":
        return Schema("map", optional, items=from_avro(avro["values"], False, named, namespace))
    if avro.get("logicalType") in AVRO_TO_LOGICAL and kind in ("int", "long", "bytes", "fixed"):
        return _logical(avro, optional)
    connect_type = avro.get("connect.type")
    if kind == "int" and connect_type in ("int8", "int16"):
        return Schema(connect_type, optional)
    if kind not in FROM_AVRO:
        raise DataException(f"AvroConverter cannot read Avro type {kind}")
    return Schema(FROM_AVRO[kind], optional)


def _logical(avro: Mapping[str, Any], optional: bool) -> Schema:
    """Avro's decimal, date, time-millis and timestamp-millis as Connect's logical types,
    the parameters from `connect.parameters` when Connect wrote them, else the scale
    and `connect.decimal.precision`, as AvroData reads a plain Avro writer's schema."""
    name = AVRO_TO_LOGICAL[avro["logicalType"]]
    if name != logical.DECIMAL:
        return Schema(logical.PRIMITIVE[name], optional, name, version=1)
    written = avro.get("connect.parameters")
    if isinstance(written, Mapping) and logical.SCALE in written:
        parameters = tuple((str(k), str(v)) for k, v in written.items())
    else:
        parameters = ((logical.SCALE, str(avro.get("scale", 0))),
                      (PRECISION, str(avro.get("precision", DEFAULT_PRECISION))))
    return Schema("bytes", optional, name, version=1, parameters=parameters)


def _record(avro: Mapping[str, Any], optional: bool, named: dict[str, Schema],
            namespace: str) -> Schema:
    name = str(avro["name"])
    if "." not in name:
        namespace = str(avro.get("namespace", namespace) or "")
        name = f"{namespace}.{name}" if namespace else name
    else:
        namespace = name.rpartition(".")[0]
    fields = tuple((f["name"], from_avro(f["type"], False, named, namespace))
                   for f in avro["fields"])
    schema = Schema("struct", optional, avro.get("connect.name") or name, fields)
    named[name] = schema
    return schema


class AvroConverter(RegistryConverter):
    kafka_class = "io.confluent.connect.avro.AvroConverter"
    schema_type = "AVRO"

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        self.texts: dict[Schema, tuple[str, str | None]] = {}
        self.parsed: dict[str, Any] = {}
        self.readers: dict[int, tuple[Any, Schema]] = {}

    def schema_for(self, schema: Schema) -> tuple[str, str | None]:
        found = self.texts.get(schema)
        if found is None:
            avro = to_avro(schema)
            name = None
            if isinstance(avro, dict) and avro.get("type") == "record":
                name = ".".join(p for p in (avro.get("namespace"), avro["name"]) if p)
            found = self.texts[schema] = (json.dumps(avro, separators=(",", ":")), name)
        return found

    def encode(self, text: str, schema: Schema, value: Any) -> bytes:
        parsed = self.parsed.get(text)
        if parsed is None:
            parsed = self.parsed[text] = fastavro.parse_schema(json.loads(text))
        return self.encode_with(parsed, schema, value)

    def parse_registered(self, registered: Registered) -> Any:
        if registered.schema_type != "AVRO":
            raise DataException(f"Schema {registered.id} is {registered.schema_type}, not AVRO")
        return fastavro.parse_schema(json.loads(registered.text))

    def encode_with(self, parsed: Any, schema: Schema, value: Any) -> bytes:
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise DataException(f"Failed to serialize Avro data: {exc}") from exc
        return out.getvalue()

    def decode(self, schema_id: int, payload: bytes) -> tuple[Schema | None, Any]:
        reader = self.readers.get(schema_id)
        if reader is None:
            registered = self.registry.schema(schema_id)
            if registered.schema_type != "AVRO":
                raise DataException(f"Schema {schema_id} is {registered.schema_type}, not AVRO")
            writer = json.loads(registered.text)
            reader = self.readers[schema_id] = (fastavro.parse_schema(writer),
                                                from_avro(writer))
        try:
            value = fastavro.schemaless_reader(io.BytesIO(payload), reader[0], None)
        except (ValueError, TypeError, EOFError, IndexError, UnicodeDecodeError) as exc:
            raise DataException(f"Failed to deserialize Avro data for schema id {schema_id}: "
                                f"{exc}") from exc
        return reader[1], value
