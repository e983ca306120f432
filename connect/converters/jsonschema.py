"""`io.confluent.connect.json.JsonSchemaConverter`: Connect data as JSON in Confluent's wire
format, with its JSON Schema in the registry.

Connect schemas map as Confluent's JsonSchemaData maps them: integers are `integer` and
floats `number`, each with `connect.type` (int8 ... float64) so that they read back as the
same Connect type; bytes a base64 `string` with `connect.type: bytes`; a struct an
`object` titled by the schema's name, its properties numbered by `connect.index`; a map an
`object` whose `additionalProperties` are the values; an optional schema
`oneOf [null, T]`. A named schema has its name as `title`, with `connect.version` and
`connect.parameters`: Connect's logical types are a Decimal as a `number` of
`connect.type` bytes (a JSON number with every digit), Date and Time `integer`s of
`connect.type` int32, Timestamp an int64 `integer`. A value is checked against its schema
(jsonschema) before it is written, so a record that does not fit its registered schema
(use.latest.version) is a DataException, subject to errors.tolerance, never bytes the
consumers cannot read.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
from collections.abc import Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from connect import logical
from connect.api import DataException, Schema

from .registry import Registered, RegistryConverter

DRAFT = "http://json-schema.org/draft-07/schema#"
INTEGERS = ("int8", "int16", "int32", "int64")
NUMBERS = ("float32", "float64")


def to_json_schema(schema: Schema, top: bool = True, index: int | None = None
                   ) -> dict[str, Any]:
    out = _plain(schema)
    if index is not None:
        out["connect.index"] = index
    if schema.optional:
        out = {"oneOf": [{"type": "null"}, out]}
        if index is not None:
            out["connect.index"] = index
    if top:
        out = {"$schema": DRAFT, **out}
    return out


def _plain(schema: Schema) -> dict[str, Any]:
    out = _of_type(schema)
    if schema.type != "struct" and schema.name:
        out["title"] = schema.name  # a struct's title is its name already
    if schema.version is not None:
        out["connect.version"] = schema.version
    if schema.parameters:
        out["connect.parameters"] = dict(schema.parameters)
    return out


def _of_type(schema: Schema) -> dict[str, Any]:
    kind = schema.type
    if schema.name == logical.DECIMAL:
        return {"type": "number", "connect.type": "bytes"}  # a JSON number, every digit
    if kind in INTEGERS:
        return {"type": "integer", "connect.type": kind}
    if kind in NUMBERS:
        return {"type": "number", "connect.type": kind}
    if kind in ("boolean", "string"):
        return {"type": kind}
    if kind == "bytes":
        return {"type": "string", "connect.type": "bytes"}
    if kind == "array":
        return {"type": "array", "items": to_json_schema(schema.items or Schema("string"),
                                                        top=False)}
    if kind == "map":
        return {"type": "object", "connect.type": "map",
                "additionalProperties": to_json_schema(schema.items or Schema("string"),
                                                       top=False)}
    if kind == "struct":
        out: dict[str, Any] = {"type": "object"}
        if schema.name:
            out["title"] = schema.name
        out["properties"] = {name: to_json_schema(s, top=False, index=i)
                             for i, (name, s) in enumerate(schema.fields)}
        out["required"] = [name for name, s in schema.fields if not s.optional]
        return out
    raise DataException(f"JsonSchemaConverter cannot write Connect type {kind}")


def from_json_schema(node: Any, optional: bool = False) -> Schema | None:
    """The Connect schema of a JSON Schema; None where it says nothing Connect can name
    (an empty or `true` schema): such values read as plain JSON."""
    if not isinstance(node, Mapping):
        return None
    for combiner in ("oneOf", "anyOf"):
        if combiner in node:
            branches = [b for b in node[combiner] if not (isinstance(b, Mapping)
                                                          and b.get("type") == "null")]
            if len(branches) == 1:
                return from_json_schema(branches[0], True)
            return None
    kind = node.get("type")
    if isinstance(kind, list):
        types: list[Any] = kind
        rest = [k for k in types if k != "null"]
        kind, optional = (rest[0] if len(rest) == 1 else None), optional or "null" in types
    connect_type = node.get("connect.type")
    if kind in ("integer", "number"):
        return _number(node, kind, optional)
    if kind == "string":
        return Schema("bytes" if connect_type == "bytes" else "string", optional)
    if kind == "boolean":
        return Schema("boolean", optional)
    if kind == "array":
        return Schema("array", optional, items=from_json_schema(node.get("items")))
    if kind == "object":
        return _object(node, optional)
    return None


def _number(node: Mapping[str, Any], kind: str, optional: bool) -> Schema:
    """A number, with the name (`title`), version and parameters Connect wrote: its logical
    types (a Decimal is a `number` of `connect.type` bytes, a Date an int32 integer)."""
    connect_type = node.get("connect.type")
    if kind == "integer":
        connect_type = connect_type if connect_type in INTEGERS else "int64"
    elif connect_type != "bytes":
        connect_type = connect_type if connect_type in NUMBERS else "float64"
    version = node.get("connect.version")
    parameters = node.get("connect.parameters")
    title = node.get("title")
    return Schema(str(connect_type), optional, str(title) if title else None,
                  version=int(version) if isinstance(version, int) else None,
                  parameters=tuple((str(k), str(v)) for k, v in parameters.items())
                  if isinstance(parameters, Mapping) else ())


def _object(node: Mapping[str, Any], optional: bool) -> Schema | None:
    if "properties" not in node:
        values = node.get("additionalProperties")
        return Schema("map", optional, items=from_json_schema(values)) if isinstance(
            values, Mapping) else None
    properties = sorted(node["properties"].items(),
                        key=lambda item: item[1].get("connect.index", 0)
                        if isinstance(item[1], Mapping) else 0)
    fields = []
    for name, sub in properties:
        field = from_json_schema(sub)
        if field is None:
            return None  # a property Connect cannot type: the whole object is plain JSON
        fields.append((name, field))
    return Schema("struct", optional, node.get("title"), tuple(fields))


def to_json_value(schema: Schema | None, value: Any) -> Any:
    if value is None or schema is None:
        return value
    if schema.name == logical.DECIMAL:
        if isinstance(value, bytes | bytearray):
            return logical.bytes_decimal(bytes(value), logical.scale_of(schema))
        return value  # a Decimal: json_dumps writes it as a number with all its digits
    if schema.name in logical.PRIMITIVE:
        return logical.to_primitive(schema, value)
    if schema.type == "bytes":
        return base64.b64encode(value).decode()
    if schema.type == "struct":
        types = dict(schema.fields)
        return {k: to_json_value(types.get(k), v) for k, v in value.items()}
    if schema.type == "array":
        return [to_json_value(schema.items, v) for v in value]
    if schema.type == "map":
        return {k: to_json_value(schema.items, v) for k, v in value.items()}
    return value


def from_json_value(schema: Schema | None, value: Any) -> Any:
    if value is None or schema is None:
        return value
    if schema.name in logical.PRIMITIVE:
        return logical.from_primitive(schema, value)
    if schema.type in NUMBERS and isinstance(value, decimal.Decimal):
        return float(value)  # parsed exactly for a Decimal elsewhere in the record
    if schema.type == "bytes":
        return base64.b64decode(value, validate=True)
    if schema.type == "struct" and isinstance(value, Mapping):
        types = dict(schema.fields)
        return {k: from_json_value(types.get(k), v) for k, v in value.items()}
    if schema.type == "array" and isinstance(value, list):
        return [from_json_value(schema.items, v) for v in value]
    if schema.type == "map" and isinstance(value, Mapping):
        return {k: from_json_value(schema.items, v) for k, v in value.items()}
    return value


def has_decimal(schema: Schema | None) -> bool:
    """Whether a record of `schema` holds a Decimal: its numbers are then parsed exactly."""
    if schema is None:
        return False
    return (schema.name == logical.DECIMAL or has_decimal(schema.items)
            or any(has_decimal(s) for _, s in schema.fields))


def _validator(document: Any) -> Any:
    cls = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    return cls(document)


class JsonSchemaConverter(RegistryConverter):
    kafka_class = "io.confluent.connect.json.JsonSchemaConverter"
    schema_type = "JSON"

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        self.texts: dict[Schema, tuple[str, str | None]] = {}
        self.validators: dict[str, Any] = {}
        self.readers: dict[int, Schema | None] = {}  # the Connect schema of each id

    def schema_for(self, schema: Schema) -> tuple[str, str | None]:
        found = self.texts.get(schema)
        if found is None:
            document = to_json_schema(schema)
            name = schema.name if schema.type == "struct" else None
            found = self.texts[schema] = (json.dumps(document, separators=(",", ":")), name)
        return found

    def encode(self, text: str, schema: Schema, value: Any) -> bytes:
        validator = self.validators.get(text)
        if validator is None:
            validator = self.validators[text] = _validator(json.loads(text))
        return self.encode_with(validator, schema, value)

    def parse_registered(self, registered: Registered) -> Any:
        if registered.schema_type != "JSON":
            raise DataException(f"Schema {registered.id} is {registered.schema_type}, not JSON")
        return _validator(json.loads(registered.text))

    def encode_with(self, parsed: Any, schema: Schema, value: Any) -> bytes:
        try:
            document = to_json_value(schema, value)
        except (TypeError, AttributeError) as exc:
            raise DataException(f"Converting Kafka Connect data to JSON failed: {exc}") from exc
        error = jsonschema.exceptions.best_match(parsed.iter_errors(document))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise DataException(f"Validation error in JSON at /{where}: {error.message}")
        return logical.json_dumps(document).encode()

    def decode(self, schema_id: int, payload: bytes) -> tuple[Schema | None, Any]:
        if schema_id not in self.readers:
            registered = self.registry.schema(schema_id)
            if registered.schema_type != "JSON":
                raise DataException(f"Schema {schema_id} is {registered.schema_type}, not JSON")
            self.readers[schema_id] = from_json_schema(json.loads(registered.text))
        reader = self.readers[schema_id]
        try:
            value = json.loads(payload, parse_float=decimal.Decimal if has_decimal(reader)
                               else float)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to "
                                f"serialization error: {exc}") from exc
        try:
            return reader, from_json_value(reader, value)
        except (binascii.Error, ValueError) as exc:
            raise DataException(f"Converting JSON to Kafka Connect data failed: {exc}") from exc
