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


def _avro_schema(topic: str, role: str, body: dict[str, Any]) -> tuple[int, Any] | None:
    inline, by_id = body.get(f"{role}_schema"), body.get(f"{role}_schema_id")
    registry = schemas.registry()
    if inline is not None:
        text = inline if isinstance(inline, str) else (formats.json_bytes(inline) or b"").decode()
        return registry.register(f"{topic}-{role}", text), None
    if by_id is not None:
        if not isinstance(by_id, int):
            raise errors.invalid_payload(f"{role}_schema_id must be an integer")
        registry.by_id(by_id)
        return by_id, None
    return None


def v2_batch(topic: str, partition: int | None, fmt: EmbeddedFormat,
             body: dict[str, Any]) -> V2Batch:
    raw_records = body.get("records")
    if not isinstance(raw_records, list) or not all(isinstance(r, dict) for r in raw_records):
        raise errors.invalid_payload("records must be a list of objects")
    if fmt is EmbeddedFormat.AVRO:
        return _v2_avro(topic, partition, raw_records, body)
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


def _v2_avro(topic: str, partition: int | None, raw: list[dict[str, Any]],
             body: dict[str, Any]) -> V2Batch:
    key_schema = _avro_schema(topic, "key", body)
    value_schema = _avro_schema(topic, "value", body)
    if key_schema is None and any(r.get("key") is not None for r in raw):
        raise errors.key_schema_missing()
    if value_schema is None and any(r.get("value") is not None for r in raw):
        raise errors.value_schema_missing()
    registry = schemas.registry()
    key_id = key_schema[0] if key_schema else None
    value_id = value_schema[0] if value_schema else None
    records = []
    for r in raw:
        key = value = None
        if key_id is not None and r.get("key") is not None:
            key = schemas.encode(key_id, registry.by_id(key_id), r["key"])
        if value_id is not None and r.get("value") is not None:
            value = schemas.encode(value_id, registry.by_id(value_id), r["value"])
        records.append(OutgoingRecord(value, key, _v2_partition(r, partition)))
    return V2Batch(records, key_id, value_id)


# --- v3 ---------------------------------------------------------------------------------

V3_TYPES = {"BINARY", "JSON", "STRING", "AVRO"}


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
    if not kind:
        has_schema = any(spec.get(k) is not None for k in ("schema", "schema_id", "schema_version"))
        kind = "AVRO" if has_schema else "BINARY"
    data = spec.get("data")
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
    return _v3_avro(topic, role, spec, data), kind


def _v3_avro(topic: str, role: str, spec: dict[str, Any], data: Any) -> bytes | None:
    registry = schemas.registry()
    subject = spec.get("subject") or f"{topic}-{role}"
    if spec.get("schema") is not None:
        schema_id = registry.register(subject, str(spec["schema"]))
        parsed = registry.by_id(schema_id)
    elif spec.get("schema_id") is not None:
        schema_id = int(spec["schema_id"])
        parsed = registry.by_id(schema_id)
    else:
        version = spec.get("schema_version")
        schema_id, parsed = registry.by_subject_version(
            subject, "latest" if version is None else version
        )
    return None if data is None else schemas.encode(schema_id, parsed, data)


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
