"""JSON Schema values as typed Spark columns, and Spark rows as JSON Schema values.

Types map as a reader of the schema would expect them: an object with ``properties`` is a
struct (fields in the order the schema lists them; nullable unless ``required`` and not
allowing ``null``), an object with only ``additionalProperties`` a ``MAP<STRING, T>``,
``array`` an array of its ``items``, ``integer`` BIGINT, ``number`` DOUBLE, ``boolean``,
``string`` (``format: date-time`` a TIMESTAMP, ``format: date`` a DATE), ``enum`` of strings a
STRING, ``["T", "null"]`` and ``anyOf``/``oneOf`` with a ``null`` branch a nullable ``T``,
``allOf`` of objects their merged properties. What has no single Spark type (a union of unlike
types, ``{}``) is a STRING holding the value's JSON text. ``$ref`` is followed inside the
schema (``#/definitions/...``, ``#/$defs/...``) and to other subjects through the schema's
references, by name, as the registry resolves them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkkafka.schema_registry import RegisteredSchema, RegistryClient, SchemaError, json_text

Converter = Callable[[Any], Any]
_SCALARS: dict[str, DataType] = {
    "integer": LongType(),
    "number": DoubleType(),
    "boolean": BooleanType(),
    "string": StringType(),
}
_FORMATS: dict[str, DataType] = {"date-time": TimestampType(), "date": DateType()}


class Resolver:
    """``$ref`` targets: JSON pointers into the root schema or into a referenced subject's."""

    def __init__(self, root: Any, documents: dict[str, Any]) -> None:
        self.root = root
        self.documents = documents

    @classmethod
    def of(cls, registry: RegistryClient, schema: RegisteredSchema) -> Resolver:
        documents: dict[str, Any] = {}
        pending = list(schema.references)
        while pending:
            reference = pending.pop()
            if reference.name in documents:
                continue
            referenced = registry.version(reference.subject, reference.version)
            documents[reference.name] = json_text(referenced)
            pending.extend(referenced.references)
        return cls(json_text(schema), documents)

    def resolve(self, ref: str, base: Any) -> Any:
        url, _, pointer = ref.partition("#")
        document = self.documents.get(url, base) if url else base
        if url and url not in self.documents:
            raise SchemaError(f"$ref {ref!r} names no reference of the schema")
        for part in [p for p in pointer.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                document = document[int(part) if isinstance(document, list) else part]
            except (KeyError, IndexError, ValueError, TypeError) as exc:
                raise SchemaError(f"$ref {ref!r} points at nothing") from exc
        return document


def _follow(schema: Any, resolver: Resolver, seen: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
    while isinstance(schema, dict) and "$ref" in schema:
        ref = schema["$ref"]
        if ref in seen:
            raise SchemaError(f"$ref {ref!r} is recursive; a Spark type cannot be")
        seen = (*seen, ref)
        schema = resolver.resolve(ref, resolver.root)
    return schema, seen


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [str(k) for k in kind]
    if "properties" in schema or "additionalProperties" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return ["string"]
    return []


def _branches(schema: dict[str, Any]) -> list[Any] | None:
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return list(schema[key])
    return None


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def spark_type(schema: Any, resolver: Resolver, seen: tuple[str, ...] = ()) -> DataType:
    """The Spark type of values valid under ``schema`` (the module's docstring says how)."""
    return _shape(schema, resolver, seen)[0]


def _shape(schema: Any, resolver: Resolver, seen: tuple[str, ...]) -> tuple[DataType, bool]:
    """The Spark type and whether ``null`` is a valid value."""
    schema, seen = _follow(schema, resolver, seen)
    if not isinstance(schema, dict):
        return StringType(), True  # `true` / `{}`: anything, kept as JSON text
    branches = _branches(schema)
    if branches is not None:
        others = [b for b in branches if not _is_null(_follow(b, resolver, seen)[0])]
        nullable = len(others) < len(branches)
        if len(others) == 1:
            kind, inner_null = _shape(others[0], resolver, seen)
            return kind, nullable or inner_null
        return StringType(), True
    if "allOf" in schema:
        return _struct(_merged(schema, resolver, seen), resolver, seen), True
    types = _types(schema)
    nullable = "null" in types or not types
    types = [t for t in types if t != "null"]
    if len(types) != 1:
        if types and set(types) <= {"integer", "number"}:
            return DoubleType(), nullable
        return StringType(), True
    return _single(types[0], schema, resolver, seen), nullable


def _single(
    kind: str, schema: dict[str, Any], resolver: Resolver, seen: tuple[str, ...]
) -> DataType:
    if kind == "object":
        if "properties" not in schema and isinstance(schema.get("additionalProperties"), dict):
            values = spark_type(schema["additionalProperties"], resolver, seen)
            return MapType(StringType(), values, True)
        return _struct(schema, resolver, seen)
    if kind == "array":
        items = schema.get("items", {})
        return ArrayType(
            spark_type(items, resolver, seen) if isinstance(items, dict) else StringType(), True
        )
    if kind == "string" and schema.get("format") in _FORMATS:
        return _FORMATS[schema["format"]]
    if kind not in _SCALARS:
        raise SchemaError(f"JSON Schema type {kind!r} is not one Spark can hold")
    return _SCALARS[kind]


def _merged(schema: dict[str, Any], resolver: Resolver, seen: tuple[str, ...]) -> dict[str, Any]:
    properties: dict[str, Any] = dict(schema.get("properties", {}))
    required: list[str] = list(schema.get("required", []))
    for part in schema["allOf"]:
        part, _ = _follow(part, resolver, seen)
        if isinstance(part, dict) and "allOf" in part:
            part = _merged(part, resolver, seen)
        if isinstance(part, dict):
            properties.update(part.get("properties", {}))
            required.extend(part.get("required", []))
    return {"type": "object", "properties": properties, "required": required}


def _struct(schema: dict[str, Any], resolver: Resolver, seen: tuple[str, ...]) -> StructType:
    required = set(schema.get("required", []))
    fields = []
    for name, member in schema.get("properties", {}).items():
        kind, allows_null = _shape(member, resolver, seen)
        fields.append(StructField(name, kind, allows_null or name not in required))
    return StructType(fields)


def converter(kind: DataType, path: str = "value") -> Converter:
    """A function from a parsed JSON value to a value of Spark type ``kind``; SchemaError
    (naming the JSON path) for a value of another type."""
    if isinstance(kind, StructType):
        return _struct_converter(kind, path)
    if isinstance(kind, ArrayType):
        items = converter(kind.elementType, path + "[]")
        return lambda v: None if v is None else [items(x) for x in _expect(v, list, path)]
    if isinstance(kind, MapType):
        values = converter(kind.valueType, path + "{}")
        return lambda v: (
            None if v is None else {k: values(x) for k, x in _expect(v, dict, path).items()}
        )
    return _scalar_converter(kind, path)


def _struct_converter(kind: StructType, path: str) -> Converter:
    fields = [(f.name, f.nullable, converter(f.dataType, f"{path}.{f.name}")) for f in kind.fields]

    def convert(v: Any) -> Any:
        if v is None:
            return None
        _expect(v, dict, path)
        out = []
        for name, nullable, conv in fields:
            value = conv(v.get(name))
            if value is None and not nullable:
                raise SchemaError(f"{path}.{name} is required")
            out.append(value)
        return tuple(out)

    return convert


def _scalar_converter(kind: DataType, path: str) -> Converter:
    if isinstance(kind, LongType):
        return lambda v: None if v is None else _integer(v, path)
    if isinstance(kind, DoubleType):
        return lambda v: None if v is None else float(_expect(v, (int, float), path))
    if isinstance(kind, BooleanType):
        return lambda v: None if v is None else _expect(v, bool, path)
    if isinstance(kind, TimestampType):
        return lambda v: None if v is None else _timestamp(_expect(v, str, path), path)
    if isinstance(kind, DateType):
        return lambda v: None if v is None else _date(_expect(v, str, path), path)
    # STRING: a string as it is, anything else (a union of unlike types, `{}`) as JSON text
    return lambda v: v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def _expect(value: Any, kinds: type | tuple[type, ...], path: str) -> Any:
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds in (int, (int, float))):
        raise SchemaError(
            f"{path}: {type(value).__name__} {json.dumps(value)[:40]} is not what the schema says"
        )
    return value


def _integer(value: Any, path: str) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return int(_expect(value, int, path))


def _timestamp(value: str, path: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise SchemaError(f"{path}: {value!r} is not a date-time") from exc


def _date(value: str, path: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise SchemaError(f"{path}: {value!r} is not a date") from exc


def decoder(kind: DataType) -> Callable[[bytes], Any]:
    """Wire-format body (after magic byte and id) to a value of ``kind``."""
    convert = converter(kind)

    def decode(body: bytes) -> Any:
        try:
            value = json.loads(body)
        except ValueError as exc:
            raise SchemaError(f"not JSON: {exc}") from exc
        return convert(value)

    return decode


# -- writing --------------------------------------------------------------------------------


def schema_for(kind: DataType, title: str | None = None) -> dict[str, Any]:
    """A draft-07 JSON Schema for Spark values of type ``kind`` (``to_json_schema`` registers
    it when given no schema): structs are closed objects whose non-nullable fields are
    required, nullable fields allow ``null``."""
    schema = _schema_of(kind, nullable=False)
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
    if title:
        schema["title"] = title
    return schema


def _schema_of(kind: DataType, nullable: bool) -> dict[str, Any]:
    schema = _bare_schema_of(kind)
    if nullable:
        if "type" in schema:
            schema = {**schema, "type": [schema["type"], "null"]}
        else:
            schema = {"oneOf": [{"type": "null"}, schema]}
    return schema


def _bare_schema_of(kind: DataType) -> dict[str, Any]:
    if isinstance(kind, StructType):
        return {
            "type": "object",
            "properties": {f.name: _schema_of(f.dataType, f.nullable) for f in kind.fields},
            "required": [f.name for f in kind.fields if not f.nullable],
            "additionalProperties": False,
        }
    if isinstance(kind, ArrayType):
        return {"type": "array", "items": _schema_of(kind.elementType, kind.containsNull)}
    if isinstance(kind, MapType):
        return {"type": "object", "additionalProperties": _schema_of(kind.valueType, True)}
    if isinstance(kind, (LongType, IntegerType, ShortType, ByteType)):
        return {"type": "integer"}
    if isinstance(kind, (DoubleType, FloatType, DecimalType)):
        return {"type": "number"}
    if isinstance(kind, BooleanType):
        return {"type": "boolean"}
    if isinstance(kind, (TimestampType, TimestampNTZType)):
        return {"type": "string", "format": "date-time"}
    if isinstance(kind, DateType):
        return {"type": "string", "format": "date"}
    if isinstance(kind, BinaryType):
        return {"type": "string", "contentEncoding": "base64"}
    if isinstance(kind, StringType):
        return {"type": "string"}
    raise SchemaError(f"no JSON Schema for Spark type {kind.simpleString()}")


def jsonable(value: Any) -> Any:
    """A Spark value (Rows as dicts) as JSON-serializable Python: dates and timestamps in ISO
    8601, bytes in base64, decimals as numbers."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return float(value)
    return value
