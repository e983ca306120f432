"""Values in Confluent's wire format, per schema type: what the message browser shows and
what produce-a-message writes.

Every format starts with the magic byte 0 and the 4-byte big-endian schema id. Then:
- Avro: the Avro binary encoding;
- JSON Schema: the value as UTF-8 JSON (validated against the schema when written, and
  when read, so a value that no longer fits is shown with a note);
- Protobuf: the message indexes (`registry.protobuf.wire`), then the serialized message;
  shown as its canonical proto3 JSON (lowerCamelCase names, 64-bit integers as strings,
  enums by name, defaults left out), as Confluent's REST proxy and deserializers print it.

`read()` and `write()` take the registry's parsed schema (`registry.lookups`); a value
that does not fit raises `WireError` with the format library's own words.
"""

from __future__ import annotations

import io
import json
import struct
from dataclasses import dataclass
from typing import Any

import fastavro
import fastavro.validation
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from jsonschema.exceptions import best_match  # type: ignore[import-untyped]

from registry.formats import AVRO, JSON, PROTOBUF, ParsedSchema

MAGIC = 0
HEADER = struct.Struct(">bI")


class WireError(ValueError):
    """The bytes or the value do not fit the schema: the message says why."""


@dataclass(frozen=True)
class Decoded:
    datum: Any  # JSON-ready, but Avro's logical types (the caller's JSON encoder)
    message_type: str = ""  # Protobuf: the full name of the message the indexes name
    note: str = ""  # read, but with something to say (a JSON value outside its schema)


def read(schema_type: str, schema: ParsedSchema, body: bytes) -> Decoded:
    """The value after magic byte and id; WireError if `schema` cannot read it."""
    if schema_type == AVRO:
        return Decoded(fastavro.schemaless_reader(io.BytesIO(body), schema.parsed, None))
    if schema_type == JSON:
        try:
            datum = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise WireError(f"not JSON: {exc}") from exc
        problem = json_schema_problem(schema, datum)
        return Decoded(datum, note=f"does not match its schema: {problem}" if problem else "")
    if schema_type == PROTOBUF:
        return _read_protobuf(schema, body)
    raise WireError(f"schema type {schema_type} is not one the browser reads")


def write(schema_type: str, schema: ParsedSchema, schema_id: int, datum: Any,
          message_type: str = "") -> bytes:
    """`datum` (parsed JSON) in the wire format; WireError in the schema's words if it does
    not fit. `message_type` picks a Protobuf message (default: the file's first)."""
    header = HEADER.pack(MAGIC, schema_id)
    if schema_type == AVRO:
        out = io.BytesIO(header)
        out.seek(len(header))
        try:
            fastavro.validation.validate(datum, schema.parsed, raise_errors=True)
            fastavro.schemaless_writer(out, schema.parsed, datum)
        except Exception as exc:  # fastavro's validation errors share no base class
            raise WireError(str(exc)) from exc
        return out.getvalue()
    if schema_type == JSON:
        problem = json_schema_problem(schema, datum)
        if problem:
            raise WireError(problem)
        try:
            text = json.dumps(datum, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)
        except ValueError as exc:  # 1e999 parses as infinity, which JSON cannot carry
            raise WireError(f"{exc}: JSON has no infinity or NaN") from exc
        return header + text.encode()
    if schema_type == PROTOBUF:
        return header + _write_protobuf(schema, datum, message_type)
    raise WireError(f"schema type {schema_type} is not one the control center writes")


def json_schema_problem(schema: ParsedSchema, datum: Any) -> str:
    """The most relevant validation error, with where it is (JSON pointer); "" if none."""
    validator = schema.validator(schema.parsed, registry=schema.registry)  # type: ignore[attr-defined]
    error = best_match(validator.iter_errors(datum))
    if error is None:
        return ""
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"at {where}: {error.message}"


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             type(None): "null", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _read_protobuf(schema: ParsedSchema, body: bytes) -> Decoded:
    from registry.protobuf import wire

    framed = bytes(5) + body  # wire.read_message_indexes counts from the framed value
    try:
        indexes, start = wire.read_message_indexes(framed)
        cls = wire.message_class(schema, indexes)  # type: ignore[arg-type]
        message = cls.FromString(framed[start:])
    except (ValueError, KeyError, DecodeError) as exc:
        raise WireError(str(exc) or type(exc).__name__) from exc
    datum = json_format.MessageToDict(message)
    return Decoded(datum, message_type=message.DESCRIPTOR.full_name)


def _write_protobuf(schema: ParsedSchema, datum: Any, message_type: str) -> bytes:
    from registry.protobuf import wire

    indexes = message_indexes(schema.parsed, message_type)
    cls = wire.message_class(schema, indexes)  # type: ignore[arg-type]
    if not isinstance(datum, dict):
        raise WireError(f"a {cls.DESCRIPTOR.full_name} message is a JSON object, not "
                        f"{json_type(datum)}")
    try:
        message = json_format.ParseDict(datum, cls())
    except (json_format.ParseError, TypeError, ValueError) as exc:  # its words, either way
        raise WireError(str(exc)) from exc
    serialized: bytes = message.SerializeToString()
    return encode_message_indexes(indexes) + serialized


def message_types(file: Any) -> list[str]:
    """Every message of a FileDescriptorProto by full name, nested ones after their parent,
    in declaration order (the order message indexes count)."""
    prefix = f"{file.package}." if file.package else ""
    names: list[str] = []

    def walk(messages: Any, scope: str) -> None:
        for message in messages:
            if message.options.map_entry:
                continue  # map entries are protoc's, not the user's
            names.append(scope + message.name)
            walk(message.nested_type, f"{scope}{message.name}.")

    walk(file.message_type, prefix)
    return names


def message_indexes(file: Any, message_type: str) -> list[int]:
    """The indexes of `message_type` (full name, a leading dot allowed) in `file`; the
    first message ([0]) when it is empty. WireError if the file has no such message."""
    if not file.message_type:
        raise WireError("the schema declares no message")
    if not message_type:
        return [0]
    wanted = message_type.lstrip(".")
    prefix = f"{file.package}." if file.package else ""
    pending: list[tuple[Any, str, list[int]]] = [(file.message_type, prefix, [])]
    while pending:
        messages, scope, path = pending.pop()
        for index, message in enumerate(messages):
            name = scope + message.name
            if name == wanted:
                return [*path, index]
            pending.append((message.nested_type, f"{name}.", [*path, index]))
    raise WireError(f"the schema has no message {wanted}; it has "
                    f"{', '.join(message_types(file))}")


def encode_message_indexes(indexes: list[int]) -> bytes:
    """Zig-zag varints: the count, then each index; [0] as the single byte 0."""
    if indexes == [0]:
        return b"\x00"
    return b"".join(_zigzag(n) for n in (len(indexes), *indexes))


def _zigzag(value: int) -> bytes:
    encoded = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = encoded & 0x7F
        encoded >>= 7
        if encoded:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
