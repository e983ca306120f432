"""Converters between a connector's values and the bytes in Kafka, under Kafka's and
Confluent's class names so that existing worker and connector configs work unchanged.

Kafka's own converters are here; Confluent's registry-backed ones are modules of this
package (`avro`, `jsonschema`, `protobuf` over `registry`), imported when a config names
them, so a worker that uses none never loads their libraries."""

from __future__ import annotations

import base64
import decimal
import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

from connect import logical
from connect.api import BYTES_SCHEMA, OPTIONAL_STRING_SCHEMA, DataException, Schema
from connect.configdef import ConfigException


class Converter(ABC):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        self.is_key = is_key

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        ...

    @abstractmethod
    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        ...

    def from_connect_batch(self, topics: Sequence[str], schemas: Sequence[Schema | None],
                           values: Sequence[Any]) -> list[bytes | None]:
        """A source's batch at once: each record's bytes, in order, as `from_connect_data`
        gives them. A DataException means some record failed; the runner then converts
        them one by one, so that errors.tolerance skips only that record. StringConverter
        overrides it with a loop in C."""
        return list(map(self.from_connect_data, topics, schemas, values))

    def to_connect_batch(self, topics: Sequence[str], datas: Sequence[bytes | None]
                         ) -> tuple[Sequence[Schema | None], Sequence[Any]]:
        """A sink's batch at once: the schemas and the values, in order. A DataException
        means some record failed; the runner then converts them one by one, so that only
        that record goes to the DLQ. Kafka's converters override it with loops in C."""
        if not datas:
            return [], []
        schemas, values = zip(*map(self.to_connect_data, topics, datas), strict=True)
        return schemas, values


class StringConverter(Converter):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        self.encoding = str(configs.get("converter.encoding", "UTF-8"))

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return text.encode(self.encoding)

    def from_connect_batch(self, topics: Sequence[str], schemas: Sequence[Schema | None],
                           values: Sequence[Any]) -> list[bytes | None]:
        if all(map(isinstance, values, repeat(str))):
            return list(map(str.encode, values, repeat(self.encoding)))
        if values.count(None) == len(values):  # no keys
            return [None] * len(values)
        return super().from_connect_batch(topics, schemas, values)

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return OPTIONAL_STRING_SCHEMA, None
        try:
            return OPTIONAL_STRING_SCHEMA, data.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise DataException(f"Failed to deserialize string: {exc}") from exc

    def to_connect_batch(self, topics: Sequence[str], datas: Sequence[bytes | None]
                         ) -> tuple[Sequence[Schema | None], Sequence[Any]]:
        schemas = [OPTIONAL_STRING_SCHEMA] * len(datas)
        if None in datas:  # tombstones or no keys: one by one
            if datas.count(None) == len(datas):
                return schemas, [None] * len(datas)
            return super().to_connect_batch(topics, datas)
        try:
            return schemas, list(map(bytes.decode, datas,  # type: ignore[arg-type]
                                     repeat(self.encoding, len(datas))))
        except UnicodeDecodeError as exc:
            raise DataException(f"Failed to deserialize string: {exc}") from exc


class ByteArrayConverter(Converter):
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type != "bytes":
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type}")
        if value is not None and not isinstance(value, bytes | bytearray):
            raise DataException(
                f"ByteArrayConverter is not compatible with objects of type {type(value)}")
        return None if value is None else bytes(value)

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        return BYTES_SCHEMA, data

    def to_connect_batch(self, topics: Sequence[str], datas: Sequence[bytes | None]
                         ) -> tuple[Sequence[Schema | None], Sequence[Any]]:
        return [BYTES_SCHEMA] * len(datas), datas


def _to_json(schema: Schema | None, value: Any, numeric: bool = False) -> Any:
    """A Connect value as JsonConverter's payload: bytes in base64, logical types as their
    primitives (a Decimal base64, or a JSON number with decimal.format=NUMERIC)."""
    if value is None:
        return None
    if schema is not None and schema.name in logical.PRIMITIVE:
        if numeric and schema.name == logical.DECIMAL and not isinstance(value, bytes):
            return logical.JsonDecimal(value)
        value = logical.to_primitive(schema, value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if schema is None:
        return value
    if schema.type == "struct" and isinstance(value, Mapping):
        types = dict(schema.fields)
        return {k: _to_json(types.get(k), v, numeric) for k, v in value.items()}
    if schema.type == "array" and isinstance(value, list | tuple):
        return [_to_json(schema.items, v, numeric) for v in value]
    if schema.type == "map" and isinstance(value, Mapping):
        return {k: _to_json(schema.items, v, numeric) for k, v in value.items()}
    return value


_DECIMAL_NAME = f'"{logical.DECIMAL}"'.encode()


def _from_json(schema: Schema | None, value: Any) -> Any:
    if value is None or schema is None:
        return value
    if schema.type == "bytes" and isinstance(value, str):
        value = base64.b64decode(value)
    if schema.name in logical.PRIMITIVE:
        return logical.from_primitive(schema, value)
    if isinstance(value, decimal.Decimal):
        return float(value)  # parsed exactly for a Decimal elsewhere in the record
    if schema.type == "struct" and isinstance(value, Mapping):
        types = dict(schema.fields)
        return {k: _from_json(types.get(k), v) for k, v in value.items()}
    if schema.type == "array" and isinstance(value, list):
        return [_from_json(schema.items, v) for v in value]
    if schema.type == "map" and isinstance(value, Mapping):
        return {k: _from_json(schema.items, v) for k, v in value.items()}
    return value


class JsonConverter(Converter):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        enabled = str(configs.get("schemas.enable", "true")).strip().lower()
        if enabled not in ("true", "false"):
            raise ConfigException(f"Invalid value {enabled} for configuration schemas.enable")
        self.schemas_enable = enabled == "true"
        decimal_format = str(configs.get("decimal.format", "BASE64")).strip().upper()
        if decimal_format not in ("BASE64", "NUMERIC"):
            raise ConfigException(f"Invalid value {decimal_format} for configuration "
                                  "decimal.format: String must be one of: BASE64, NUMERIC")
        self.numeric = decimal_format == "NUMERIC"

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = _to_json(schema, value, self.numeric)
        if self.schemas_enable:
            payload = {"schema": schema.as_json() if schema else None, "payload": payload}
        try:
            return logical.json_dumps(payload).encode()
        except (TypeError, ValueError) as exc:
            raise DataException(f"Converting to JSON failed: {exc}") from exc

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        # a Decimal as a JSON number (decimal.format=NUMERIC) is read digit for digit
        exact = self.schemas_enable and _DECIMAL_NAME in data
        try:
            parsed = json.loads(data, parse_float=decimal.Decimal if exact else float)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataException("Converting byte[] to Kafka Connect data failed due to "
                                f"serialization error: {exc}") from exc
        if not self.schemas_enable:
            return None, parsed
        if not isinstance(parsed, dict) or set(parsed) != {"schema", "payload"}:
            raise DataException(
                'JsonConverter with schemas.enable requires "schema" and "payload" fields and '
                "may not contain additional fields. If you are trying to deserialize plain "
                "JSON data, set schemas.enable=false in your converter configuration.")
        schema = Schema.from_json(parsed["schema"]) if parsed["schema"] else None
        return schema, _from_json(schema, parsed["payload"])


CONVERTERS: dict[str, type[Converter]] = {
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
}


# Confluent's registry-backed converters: class name -> module of this package
REGISTRY_CONVERTERS = {
    "io.confluent.connect.avro.AvroConverter": "avro",
    "io.confluent.connect.json.JsonSchemaConverter": "jsonschema",
    "io.confluent.connect.protobuf.ProtobufConverter": "protobuf",
}


def converter_class(name: str) -> type[Converter]:
    """A converter by Kafka's (or Confluent's) class name or its short name."""
    for full, cls in CONVERTERS.items():
        if name in (full, full.rsplit(".", 1)[1]):
            return cls
    for full, module in REGISTRY_CONVERTERS.items():
        simple = full.rsplit(".", 1)[1]
        if name in (full, simple):
            found: type[Converter] = getattr(
                importlib.import_module(f"{__name__}.{module}"), simple)
            return found
    raise ConfigException(f"Class {name} could not be found.")


def build_converter(props: Mapping[str, str], prefix: str, is_key: bool,
                    fallback: Mapping[str, str] | None = None) -> Converter:
    """The converter named by `<prefix>` (e.g. "value.converter") with its `<prefix>.*`
    settings, from `props` if it names one, else from `fallback` (the worker's)."""
    source = props if prefix in props else (fallback or {})
    name = source.get(prefix, "org.apache.kafka.connect.json.JsonConverter")
    converter = converter_class(name)()
    sub = {k[len(prefix) + 1:]: v for k, v in source.items() if k.startswith(prefix + ".")}
    converter.configure(sub, is_key)
    return converter
