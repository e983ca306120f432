"""Avro keys and values in the Confluent wire format, decoded through a schema registry.

A record is ``0x00``, the writer schema's registry id (4 bytes, big-endian), then the Avro
binary body. The Data Source reads every record with the latest schema registered under the
topic's subject (``<topic>-value`` or ``<topic>-key``, TopicNameStrategy) as the reader
schema, so records written with older compatible schemas resolve to one Spark type. Types map
as Spark's ``from_avro`` maps them: records to structs, enums to strings, maps to
``MAP<STRING, ...>``, ``["null", T]`` to a nullable ``T``, and other unions to a struct of
``member0``, ``member1``, ...
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import fastavro
import httpx
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


class Registry:
    """Schemas by id and latest by subject from a Confluent-compatible registry, cached."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._by_id: dict[int, Schema] = {}

    def by_id(self, schema_id: int) -> Schema:
        if schema_id not in self._by_id:
            body = self._get(f"/schemas/ids/{schema_id}")
            self._by_id[schema_id] = fastavro.parse_schema(json.loads(body["schema"]))
        return self._by_id[schema_id]

    def latest(self, subject: str) -> Schema:
        body = self._get(f"/subjects/{subject}/versions/latest")
        return json.loads(body["schema"])

    def _get(self, path: str) -> dict[str, Any]:
        try:
            response = httpx.get(self.url + path, timeout=30)
        except httpx.HTTPError as exc:
            raise AvroError(f"schema registry {self.url} unreachable: {exc}") from exc
        if response.status_code != 200:
            raise AvroError(f"schema registry {path}: HTTP {response.status_code} {response.text}")
        body: dict[str, Any] = response.json()
        return body


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


def decoder(registry: Registry, reader_schema: Schema) -> Callable[[bytes | None], Any]:
    """A function from wire-format bytes to a value of ``spark_type(reader_schema)``."""
    reader = fastavro.parse_schema(reader_schema)
    convert = _converter(reader_schema)

    def decode(raw: bytes | None) -> Any:
        if raw is None:
            return None
        if len(raw) < 5 or raw[0] != 0:
            raise AvroError("not the Confluent wire format (no magic byte 0 and schema id)")
        (schema_id,) = struct.unpack(">I", raw[1:5])
        writer = registry.by_id(schema_id)
        try:
            value = fastavro.schemaless_reader(io.BytesIO(raw[5:]), writer, reader)
        except Exception as exc:
            raise AvroError(f"cannot read with schema id {schema_id}: {exc}") from exc
        return convert(value)

    return decode


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


def from_avro(column: Any, subject: str, registry_url: str) -> Any:
    """Spark's ``from_avro`` for the Confluent wire format, by subject: a column of the latest
    schema under ``subject`` as its Spark type, each value read with its own writer schema (by
    id) resolved to that one. ``column`` is a BINARY column or its name; works on batch and
    streaming frames alike (``value`` of a ``readStream``, say)."""
    from pyspark.sql import functions as F

    schema = Registry(registry_url).latest(subject)
    decoders: list[Callable[[bytes | None], Any]] = []  # one per Python worker, made lazily

    def decode(raw: bytes | None) -> Any:
        if not decoders:
            decoders.append(decoder(Registry(registry_url), schema))
        return decoders[0](None if raw is None else bytes(raw))

    target = F.col(column) if isinstance(column, str) else column
    # A lambda: Spark reads a function's type hints as a request for a pandas UDF.
    return F.udf(lambda raw: decode(raw), spark_type(schema))(target)
