"""Converters between a connector's values and the bytes in Kafka, under Kafka's class
names so that existing worker and connector configs work unchanged."""

from __future__ import annotations

import base64
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

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


class StringConverter(Converter):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        self.encoding = str(configs.get("converter.encoding", "UTF-8"))

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return text.encode(self.encoding)

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return OPTIONAL_STRING_SCHEMA, None
        try:
            return OPTIONAL_STRING_SCHEMA, data.decode(self.encoding)
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


def _to_json(schema: Schema | None, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if schema is not None and schema.type == "struct" and isinstance(value, Mapping):
        types = dict(schema.fields)
        return {k: _to_json(types.get(k), v) for k, v in value.items()}
    return value


def _from_json(schema: Schema | None, value: Any) -> Any:
    if value is None or schema is None:
        return value
    if schema.type == "bytes":
        return base64.b64decode(value)
    if schema.type == "struct" and isinstance(value, Mapping):
        types = dict(schema.fields)
        return {k: _from_json(types.get(k), v) for k, v in value.items()}
    return value


class JsonConverter(Converter):
    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        enabled = str(configs.get("schemas.enable", "true")).strip().lower()
        if enabled not in ("true", "false"):
            raise ConfigException(f"Invalid value {enabled} for configuration schemas.enable")
        self.schemas_enable = enabled == "true"

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = _to_json(schema, value)
        if self.schemas_enable:
            payload = {"schema": schema.as_json() if schema else None, "payload": payload}
        try:
            return json.dumps(payload, separators=(",", ":")).encode()
        except TypeError as exc:
            raise DataException(f"Converting to JSON failed: {exc}") from exc

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        try:
            parsed = json.loads(data)
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


def converter_class(name: str) -> type[Converter]:
    """A converter by Kafka's class name or its short name."""
    for full, cls in CONVERTERS.items():
        if name in (full, full.rsplit(".", 1)[1]):
            return cls
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
