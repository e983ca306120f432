"""Avro schemas as Spark types, Avro bodies as Spark values, Spark types as Avro schemas.

A record is ``0x00``, the writer schema's registry id (4 bytes, big-endian), then the Avro
binary body (``formats.py`` splits it and fetches schemas). Records are read with the latest
schema registered under the subject as the reader schema, so records written with older
compatible schemas resolve to one Spark type. Types map
as Spark's ``from_avro`` maps them: records to structs, enums to strings, maps to
``MAP<STRING, ...>``, ``["null", T]`` to a nullable ``T``, and other unions to a struct of
``member0``, ``member1``, ...
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

import fastavro
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

if TYPE_CHECKING:
    from sparkkafka.schema_registry import RegistryLike

Schema = Any  # a parsed Avro schema: a name, a dict or a list (union)
_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
_LOGICAL: dict[str, DataType] = {
    "date": DateType(),
    "timestamp-millis": TimestampType(),
    "timestamp-micros": TimestampType(),
    "local-timestamp-millis": TimestampNTZType(),
    "local-timestamp-micros": TimestampNTZType(),
    "uuid": StringType(),
}


class AvroError(ValueError):
    """A record or schema the decoder cannot read; the message says which and why."""


def spark_type(schema: Schema) -> DataType:
    """The Spark type Spark's ``from_avro`` gives an Avro schema."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return spark_type(branches[0])
        return StructType(
            [StructField(f"member{i}", spark_type(b), True) for i, b in enumerate(branches)]
        )
    if isinstance(schema, str):
        if schema not in _PRIMITIVES:
            raise AvroError(f"named type {schema!r} is not supported here; inline it")
        return _PRIMITIVES[schema]
    logical = schema.get("logicalType")
    if logical == "decimal":
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    kind = schema["type"]
    if kind == "record":
        return StructType(
            [StructField(f["name"], spark_type(f["type"]), True) for f in schema["fields"]]
        )
    if kind == "enum":
        return StringType()
    if kind == "array":
        return ArrayType(spark_type(schema["items"]), True)
    if kind == "map":
        return MapType(StringType(), spark_type(schema["values"]), True)
    if kind == "fixed":
        return BinaryType()
    return spark_type(kind)


def body_decoder(
    writer_of: Callable[[int], Schema], reader_schema: Schema
) -> Callable[[int, bytes], Any]:
    """(writer schema id, Avro body) to a value of ``spark_type(reader_schema)``: read with
    the writer's schema (``writer_of`` gives it parsed, by id) resolved to the reader's."""
    reader = fastavro.parse_schema(reader_schema)
    convert = _converter(reader_schema)

    def read(schema_id: int, body: bytes) -> Any:
        writer = writer_of(schema_id)
        try:
            value = fastavro.schemaless_reader(io.BytesIO(body), writer, reader)
        except Exception as exc:  # fastavro raises whatever the bytes provoke
            raise AvroError(f"cannot read with schema id {schema_id}: {exc}") from exc
        return convert(value)

    return read


def _converter(schema: Schema) -> Callable[[Any], Any]:
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            inner = _converter(branches[0])
            return lambda v: None if v is None else inner(v)
        converters = [(_python_types(b), _converter(b)) for b in branches]

        def member(v: Any) -> Any:
            if v is None:
                return None
            hit = next(i for i, (types, _) in enumerate(converters) if isinstance(v, types))
            return tuple(conv(v) if i == hit else None for i, (_, conv) in enumerate(converters))

        return member
    if isinstance(schema, dict):
        kind = schema["type"]
        if schema.get("logicalType") == "uuid":
            return lambda v: str(v) if isinstance(v, UUID) else v
        if kind == "record":
            fields = [(f["name"], _converter(f["type"])) for f in schema["fields"]]
            return lambda v: tuple(conv(v.get(name)) for name, conv in fields)
        if kind == "array":
            items = _converter(schema["items"])
            return lambda v: [items(x) for x in v]
        if kind == "map":
            values = _converter(schema["values"])
            return lambda v: {k: values(x) for k, x in v.items()}
    return lambda v: v


def _python_types(schema: Schema) -> tuple[type, ...]:
    kind = schema if isinstance(schema, str) else schema.get("logicalType") or schema["type"]
    return {
        "boolean": (bool,),
        "int": (int,),
        "long": (int,),
        "float": (float,),
        "double": (float,),
        "bytes": (bytes,),
        "fixed": (bytes,),
        "string": (str,),
        "enum": (str,),
        "record": (dict,),
        "map": (dict,),
        "array": (list,),
        "decimal": (Decimal,),
        "date": (date,),
        "uuid": (UUID, str),
    }.get(kind, (datetime,))


def from_avro(column: Any, subject: str, registry_url: RegistryLike, **options: Any) -> Any:
    """Spark's ``from_avro`` for the Confluent wire format, by subject: a column of the latest
    schema under ``subject`` as its Spark type, each value read with its own writer schema (by
    id) resolved to that one. ``column`` is a BINARY column or its name; works on batch and
    streaming frames alike (``value`` of a ``readStream``, say). ``formats.from_avro`` is the
    same (options: ``schema_id``, ``mode``)."""
    from sparkkafka import formats

    return formats.from_avro(column, subject, registry_url, **options)


def avro_schema_for(kind: DataType, name: str = "Value", nullable: bool = False) -> Schema:
    """The Avro schema Spark's ``to_avro`` gives a Spark type: structs are records (nested
    ones named after their parent and field), nullable fields ``["null", T]`` defaulting to
    null, timestamps ``timestamp-micros``, dates ``date``, decimals ``bytes`` decimals."""
    schema = _avro_of(kind, name)
    return ["null", schema] if nullable else schema


def _avro_of(kind: DataType, name: str) -> Schema:
    if isinstance(kind, StructType):
        fields = []
        for f in kind.fields:
            inner = avro_schema_for(f.dataType, f"{name}_{f.name}", f.nullable)
            fields.append(
                {"name": f.name, "type": inner, **({"default": None} if f.nullable else {})}
            )
        return {"type": "record", "name": name, "fields": fields}
    if isinstance(kind, ArrayType):
        return {
            "type": "array",
            "items": avro_schema_for(kind.elementType, name, kind.containsNull),
        }
    if isinstance(kind, MapType):
        if not isinstance(kind.keyType, StringType):
            raise AvroError(f"Avro maps have string keys, not {kind.keyType.simpleString()}")
        return {
            "type": "map",
            "values": avro_schema_for(kind.valueType, name, kind.valueContainsNull),
        }
    return _avro_scalar(kind)


def _avro_scalar(kind: DataType) -> Schema:
    if isinstance(kind, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": kind.precision,
                "scale": kind.scale}  # fmt: skip
    logical = {TimestampType: "timestamp-micros", TimestampNTZType: "local-timestamp-micros"}
    for spark, avro in logical.items():
        if isinstance(kind, spark):
            return {"type": "long", "logicalType": avro}
    if isinstance(kind, DateType):
        return {"type": "int", "logicalType": "date"}
    for avro, spark_kind in _PRIMITIVES.items():
        if kind == spark_kind:
            return avro
    if kind.typeName() in ("short", "byte"):
        return "int"
    raise AvroError(f"no Avro type for Spark type {kind.simpleString()}")
