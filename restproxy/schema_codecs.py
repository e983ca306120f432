"""The three schema formats' data: REST JSON to the bytes after the Confluent header, and back.

A codec is built once per registered schema (`schemas.SchemaRegistry.by_id` keeps it) and
checks a value completely before anything is written: a value that does not match its
schema is 42203 (`errors.json_conversion`), as Confluent's proxy answers.

- Avro: fastavro's binary encoding of the plain JSON datum.
- JSON Schema: the value validated by `jsonschema` under the schema's draft, with its
  references, then written as compact UTF-8 JSON.
- Protobuf: the value read with the canonical proto3 JSON mapping (`json_format.ParseDict`,
  which takes the JSON names and the .proto names) into the schema's first message, as
  Confluent's proxy does, written after the message indexes `[0]` (one 0 byte); read back
  with `MessageToDict`, fields with no presence included at their defaults.

JSON Schema and Protobuf schemas are parsed by the registry's own formats
(`registry.formats.get(...).parse`, and `registry.protobuf.wire` for message indexes and
classes), used as libraries: the schema text still comes from the registry's HTTP API, so
any Confluent-compatible registry works.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Sequence
from typing import Any, Protocol

import fastavro

from apierrors import ApiError

from . import errors

MAGIC = 0


def header(schema_id: int) -> bytes:
    return struct.pack(">bI", MAGIC, schema_id)


class Codec(Protocol):
    schema_type: str  # the registry's name: AVRO, JSON, PROTOBUF

    def encode(self, schema_id: int, datum: Any) -> bytes:
        """The whole Kafka value (header included); 42203 if `datum` does not match."""

    def decode(self, schema_id: int, data: bytes) -> Any:
        """The value as REST JSON from the whole Kafka value; 42207 if it cannot be read."""


class AvroCodec:
    schema_type = "AVRO"

    def __init__(self, text: str) -> None:
        try:
            self.parsed = fastavro.parse_schema(json.loads(text))
        except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
            raise errors.invalid_schema(str(exc)) from exc

    def encode(self, schema_id: int, datum: Any) -> bytes:
        out = io.BytesIO()
        out.write(header(schema_id))
        try:
            fastavro.schemaless_writer(out, self.parsed, datum)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise errors.json_conversion(f"{datum!r} does not match the schema: {exc}") from exc
        return out.getvalue()

    def decode(self, schema_id: int, data: bytes) -> Any:
        try:
            return jsonable(fastavro.schemaless_reader(io.BytesIO(data[5:]), self.parsed, None))
        except (EOFError, ValueError, TypeError, IndexError, KeyError, struct.error) as exc:
            raise errors.deserialization_failed(
                f"Not Avro of schema {schema_id}: {exc!r}") from exc


def jsonable(datum: Any) -> Any:
    """An Avro datum as JSON (bytes as ISO-8859-1 text, as Avro's JSON encoding does)."""
    if isinstance(datum, dict):
        return {key: jsonable(value) for key, value in datum.items()}
    if isinstance(datum, list):
        return [jsonable(value) for value in datum]
    if isinstance(datum, bytes):
        return datum.decode("latin-1")
    return datum


def registry_parse(schema_type: str, text: str, references: Sequence[Any]) -> Any:
    """The registry's own parse of a schema (`registry.formats`), its 42201 as our 42205."""
    from registry import formats

    try:
        return formats.get(schema_type).parse(text, references, False)
    except ApiError as exc:
        raise errors.invalid_schema(exc.message) from exc


class JsonSchemaCodec:
    schema_type = "JSON"

    def __init__(self, text: str, references: Sequence[Any]) -> None:
        self.schema = registry_parse(self.schema_type, text, references)
        self.validator = self.schema.validator(self.schema.parsed,
                                               registry=self.schema.registry)

    def encode(self, schema_id: int, datum: Any) -> bytes:
        error = next(iter(self.validator.iter_errors(datum)), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the root"
            raise errors.json_conversion(
                f"the value does not match schema {schema_id} at {where}: {error.message}")
        return header(schema_id) + json.dumps(datum, separators=(",", ":"),
                                              ensure_ascii=False).encode()

    def decode(self, schema_id: int, data: bytes) -> Any:
        try:
            return json.loads(data[5:])
        except ValueError as exc:
            raise errors.deserialization_failed(
                f"Not JSON of schema {schema_id}: {exc}") from exc


class ProtobufCodec:
    schema_type = "PROTOBUF"

    def __init__(self, text: str, references: Sequence[Any]) -> None:
        from registry.protobuf.wire import message_class

        self.schema = registry_parse(self.schema_type, text, references)
        self._message_class = message_class
        self._classes: dict[tuple[int, ...], Any] = {}

    def message_class(self, indexes: list[int]) -> Any:
        key = tuple(indexes)
        found = self._classes.get(key)
        if found is None:
            found = self._classes[key] = self._message_class(self.schema, indexes)
        return found

    def encode(self, schema_id: int, datum: Any) -> bytes:
        from google.protobuf import json_format

        if not self.schema.parsed.message_type:
            raise errors.invalid_schema(f"schema {schema_id} declares no message")
        message = self.message_class([0])()
        try:
            json_format.ParseDict(datum, message)
        except (json_format.ParseError, TypeError, ValueError, AttributeError) as exc:
            raise errors.json_conversion(
                f"the value does not match schema {schema_id}: {exc}") from exc
        serialized: bytes = message.SerializeToString()
        return header(schema_id) + b"\x00" + serialized

    def decode(self, schema_id: int, data: bytes) -> Any:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError

        from registry.protobuf.wire import read_message_indexes

        try:
            indexes, start = read_message_indexes(data, 5)
            message = self.message_class(indexes).FromString(data[start:])
        except (ValueError, KeyError, DecodeError) as exc:
            raise errors.deserialization_failed(
                f"Not Protobuf of schema {schema_id}: {exc}") from exc
        return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
