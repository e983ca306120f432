"""REST produce requests (v2 bodies, v3 entries) turned into Kafka records, all or nothing.

Every record of a request is validated and serialized before the first one is produced,
so a bad record fails the request instead of leaving it half-produced.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import errors, formats, schemas
from .client import OutgoingRecord
from .content_types import EmbeddedFormat


@dataclass
class V2Batch:
    records: list[OutgoingRecord]
    key_schema_id: int | None = None
    value_schema_id: int | None = None


def _schema_text(schema: Any) -> str:
    return schema if isinstance(schema, str) else (formats.json_bytes(schema) or b"").decode()


def _integer(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise errors.invalid_payload(f"{what} must be an integer")
    return value


def _v2_schema_id(topic: str, role: str, body: dict[str, Any], schema_type: str) -> int | None:
    inline, by_id = body.get(f"{role}_schema"), body.get(f"{role}_schema_id")
    registry = schemas.registry()
    if inline is not None:
        return registry.register(f"{topic}-{role}", _schema_text(inline), schema_type)
    if by_id is not None:
        registry.by_id(_integer(by_id, f"{role}_schema_id"), schema_type)
        return int(by_id)
    return None


def v2_batch(topic: str, partition: int | None, fmt: EmbeddedFormat,
             body: dict[str, Any]) -> V2Batch:
    raw_records = body.get("records")
    if not isinstance(raw_records, list) or not all(isinstance(r, dict) for r in raw_records):
        raise errors.invalid_payload("records must be a list of objects")
    if fmt.schema_type is not None:
        return _v2_schema(topic, partition, raw_records, body, fmt.schema_type)
    encode = formats.json_bytes if fmt is EmbeddedFormat.JSON else formats.b64decode_value
    records = [
        OutgoingRecord(encode(r.get("value")), encode(r.get("key")), _v2_partition(r, partition))
        for r in raw_records
    ]
    return V2Batch(records)


def _v2_partition(record: dict[str, Any], partition: int | None) -> int | None:
    chosen = record.get("partition", partition) if partition is None else partition
    if chosen is not None and (not isinstance(chosen, int) or isinstance(chosen, bool)):
        raise errors.invalid_payload("partition must be an integer")
    return chosen


def _v2_schema(topic: str, partition: int | None, raw: list[dict[str, Any]],
               body: dict[str, Any], schema_type: str) -> V2Batch:
    key_id = _v2_schema_id(topic, "key", body, schema_type)
    value_id = _v2_schema_id(topic, "value", body, schema_type)
    if key_id is None and any(r.get("key") is not None for r in raw):
        raise errors.key_schema_missing()
    if value_id is None and any(r.get("value") is not None for r in raw):
        raise errors.value_schema_missing()
    registry = schemas.registry()
    records = []
    for r in raw:
        key = value = None
        if key_id is not None and r.get("key") is not None:
            key = schemas.encode(registry, key_id, r["key"])
        if value_id is not None and r.get("value") is not None:
            value = schemas.encode(registry, value_id, r["value"])
        records.append(OutgoingRecord(value, key, _v2_partition(r, partition)))
    return V2Batch(records, key_id, value_id)


# --- v3 ---------------------------------------------------------------------------------

V3_TYPES = {"BINARY", "JSON", "STRING", "AVRO", "JSONSCHEMA", "PROTOBUF"}
# v3 data types with a registered schema, and the registry's schemaType of each
_SCHEMA_TYPES = {"AVRO": schemas.AVRO, "JSONSCHEMA": schemas.JSON, "PROTOBUF": schemas.PROTOBUF}
_V3_TYPES = {schema_type: kind for kind, schema_type in _SCHEMA_TYPES.items()}


@dataclass
class V3Entry:
    record: OutgoingRecord
    key_type: str | None
    value_type: str | None


def _v3_data(topic: str, role: str, spec: Any) -> tuple[bytes | None, str | None]:
    if spec is None:
        return None, None
    if not isinstance(spec, dict):
        raise errors.bad_request(f"{role} must be an object")
    kind = str(spec.get("type") or "").upper()
    data = spec.get("data")
    if not kind:  # a schema's own type, as Confluent reads it (AVRO for an inline one)
        if any(spec.get(k) is not None for k in ("schema", "schema_id", "schema_version")):
            return _v3_schema(topic, role, spec, data, None)
        kind = "BINARY"
    if kind not in V3_TYPES:
        raise errors.bad_request(f"Unsupported {role} type {kind}")
    if kind == "BINARY":
        return formats.b64decode(data, f"{role}.data"), kind
    if kind == "JSON":
        return formats.json_bytes(data), kind
    if kind == "STRING":
        if data is not None and not isinstance(data, str):
            raise errors.bad_request(f"{role}.data must be a string")
        return (None if data is None else data.encode()), kind
    return _v3_schema(topic, role, spec, data, _SCHEMA_TYPES[kind])


def _v3_schema(topic: str, role: str, spec: dict[str, Any], data: Any,
               schema_type: str | None) -> tuple[bytes | None, str]:
    """`data` in the wire format of the schema `spec` names (inline, by id, or a subject's
    version, latest by default); `schema_type` None takes the schema's own type."""
    registry = schemas.registry()
    subject = spec.get("subject") or f"{topic}-{role}"
    if not isinstance(subject, str):
        raise errors.bad_request(f"{role}.subject must be a string")
    if spec.get("schema") is not None:
        schema_type = schema_type or schemas.AVRO
        schema_id = registry.register(subject, _schema_text(spec["schema"]), schema_type)
    elif spec.get("schema_id") is not None:
        schema_id = _integer(spec["schema_id"], f"{role}.schema_id")
    else:
        version = spec.get("schema_version")
        if version is not None:
            _integer(version, f"{role}.schema_version")
        schema_id, _ = registry.by_subject_version(
            subject, "latest" if version is None else version, schema_type)
    codec = registry.by_id(schema_id, schema_type)
    encoded = None if data is None else codec.encode(schema_id, data)
    return encoded, _V3_TYPES[codec.schema_type]


def _timestamp_ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise errors.bad_request(f"Invalid timestamp {value!r}") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def _v3_headers(raw: Any) -> list[tuple[str, bytes | None]] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise errors.bad_request("headers must be a list")
    headers = []
    for header in raw:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise errors.bad_request("each header needs a name")
        headers.append((header["name"], formats.b64decode(header.get("value"), "header value")))
    return headers


def v3_entry(topic: str, body: Any) -> V3Entry:
    """One v3 produce request (or records:batch entry) as a record."""
    if not isinstance(body, dict):
        raise errors.bad_request("A record must be a JSON object")
    partition = body.get("partition_id")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool)):
        raise errors.bad_request("partition_id must be an integer")
    key, key_type = _v3_data(topic, "key", body.get("key"))
    value, value_type = _v3_data(topic, "value", body.get("value"))
    record = OutgoingRecord(value, key, partition, _v3_headers(body.get("headers")),
                            _timestamp_ms(body.get("timestamp")))
    return V3Entry(record, key_type, value_type)


@lru_cache(maxsize=4096)  # the records of one request mostly share their millisecond
def iso_timestamp(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
