"""Avro in the Confluent wire format, with schemas registered in and fetched from a registry.

A serialized value is magic byte 0, the schema id as a 4-byte big-endian integer, then the
Avro binary encoding. The registry is reached over HTTP (its Confluent-compatible API) at
`SCHEMA_REGISTRY_URL`, never in-process, so any Confluent-compatible registry works.
"""

from __future__ import annotations

import io
import json
import struct
import threading
from typing import Any

import fastavro
import httpx
from django.conf import settings

import httpauth

from . import errors
from .api import need_thread

MAGIC = 0
REGISTRY_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistry:
    """A small caching client of the registry's REST API."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=10.0)
        self._by_id: dict[int, Any] = {}
        self._ids: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        need_thread()
        # With HTTP auth on, the registry is asked as the caller too (one identity store).
        principal = httpauth.current_principal.get()
        auth = (principal.username, principal.password) if principal is not None else None
        try:
            response = self.http.request(
                method, path, json=body, headers={"Content-Type": REGISTRY_CONTENT_TYPE},
                auth=auth,
            )
        except httpx.HTTPError as exc:
            raise errors.schema_registry_failure(str(exc)) from exc
        if response.status_code == 422 or response.status_code == 409:
            raise errors.invalid_schema(response.text)
        if response.status_code == 404:
            raise errors.schema_registry_failure(f"not found: {response.text}")
        if response.status_code >= 400:
            raise errors.schema_registry_failure(response.text)
        return response.json()

    def register(self, subject: str, schema: str) -> int:
        with self._lock:
            known = self._ids.get((subject, schema))
        if known is not None:
            return known
        parsed = parse(schema)
        body = self._call("POST", f"/subjects/{subject}/versions",
                          {"schema": schema, "schemaType": "AVRO"})
        schema_id = int(body["id"])
        with self._lock:
            self._ids[(subject, schema)] = schema_id
            self._by_id[schema_id] = parsed
        return schema_id

    def by_id(self, schema_id: int) -> Any:
        with self._lock:
            known = self._by_id.get(schema_id)
        if known is not None:
            return known
        body = self._call("GET", f"/schemas/ids/{schema_id}")
        if body.get("schemaType", "AVRO") != "AVRO":
            raise errors.invalid_schema(f"schema {schema_id} is not Avro")
        parsed = parse(body["schema"])
        with self._lock:
            self._by_id[schema_id] = parsed
        return parsed

    def by_subject_version(self, subject: str, version: str | int) -> tuple[int, Any]:
        body = self._call("GET", f"/subjects/{subject}/versions/{version}")
        schema_id = int(body["id"])
        return schema_id, self.by_id(schema_id)


def parse(schema: str) -> Any:
    try:
        return fastavro.parse_schema(json.loads(schema))
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise errors.invalid_schema(str(exc)) from exc


def encode(schema_id: int, parsed: Any, datum: Any) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">bI", MAGIC, schema_id))
    try:
        fastavro.schemaless_writer(out, parsed, datum)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise errors.json_conversion(f"{datum!r} does not match the schema: {exc}") from exc
    return out.getvalue()


def decode(registry: SchemaRegistry, data: bytes) -> Any:
    if len(data) < 5 or data[0] != MAGIC:
        raise errors.deserialization_failed("Unknown magic byte!")
    schema_id = struct.unpack(">I", data[1:5])[0]
    parsed = registry.by_id(schema_id)
    try:
        return fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, None)
    except (EOFError, ValueError, TypeError, IndexError, KeyError, struct.error) as exc:
        raise errors.deserialization_failed(
            f"Not Avro of schema {schema_id}: {exc!r}") from exc


_registry: SchemaRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> SchemaRegistry:
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = SchemaRegistry(settings.SCHEMA_REGISTRY_URL)
        return _registry


def reset_registry() -> None:
    global _registry
    with _registry_lock:
        _registry = None
