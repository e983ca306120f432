"""Schema formats in the Confluent wire format, with schemas registered in and fetched from
a registry.

A serialized value is magic byte 0, the schema id as a 4-byte big-endian integer, then the
value in its schema's format (`schema_codecs.py`: Avro's binary encoding, JSON Schema's
JSON text, Protobuf's message indexes and message). The registry is reached over HTTP (its
Confluent-compatible API) at `SCHEMA_REGISTRY_URL`, never in-process, so any
Confluent-compatible registry works; a schema's references are fetched the same way, by
subject and version.
"""

from __future__ import annotations

import ssl
import struct
import threading
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings

import httpauth

from . import errors
from .api import need_thread
from .schema_codecs import AvroCodec, Codec, JsonSchemaCodec, ProtobufCodec

MAGIC = 0
REGISTRY_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
MAX_REFERENCE_DEPTH = 32


class SchemaRegistry:
    """A small caching client of the registry's REST API: schema ids to codecs."""

    def __init__(self, url: str, verify: ssl.SSLContext | bool = True) -> None:
        # verify: a context trusting the platform's own CA for an https registry
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=10.0, verify=verify)
        self._by_id: dict[int, Codec] = {}
        self._ids: dict[tuple[str, str, str], int] = {}
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

    def register(self, subject: str, schema: str, schema_type: str = AVRO) -> int:
        with self._lock:
            known = self._ids.get((subject, schema_type, schema))
        if known is not None:
            return known
        if schema_type == AVRO:
            AvroCodec(schema)  # a bad schema is 42205 before the registry is asked
        body = self._call("POST", f"/subjects/{quote(subject, safe='')}/versions",
                          {"schema": schema, "schemaType": schema_type})
        schema_id = int(body["id"])
        self.by_id(schema_id)
        with self._lock:
            self._ids[(subject, schema_type, schema)] = schema_id
        return schema_id

    def by_id(self, schema_id: int, schema_type: str | None = None) -> Codec:
        """The codec of schema `schema_id`; 42205 if it is not of `schema_type`."""
        with self._lock:
            codec = self._by_id.get(schema_id)
        if codec is None:
            body = self._call("GET", f"/schemas/ids/{schema_id}")
            codec = self._codec(body, 0)
            with self._lock:
                self._by_id[schema_id] = codec
        if schema_type is not None and codec.schema_type != schema_type:
            raise errors.invalid_schema(
                f"schema {schema_id} is {codec.schema_type}, not {schema_type}")
        return codec

    def by_subject_version(self, subject: str, version: str | int,
                           schema_type: str | None = None) -> tuple[int, Codec]:
        body = self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}")
        schema_id = int(body["id"])
        return schema_id, self.by_id(schema_id, schema_type)

    def _codec(self, body: dict[str, Any], depth: int) -> Codec:
        schema_type = str(body.get("schemaType") or AVRO).upper()
        text = str(body.get("schema", ""))
        if schema_type == AVRO:
            return AvroCodec(text)
        references = self._references(body.get("references") or [], depth)
        if schema_type == JSON:
            return JsonSchemaCodec(text, references)
        if schema_type == PROTOBUF:
            return ProtobufCodec(text, references)
        raise errors.invalid_schema(f"unknown schema type {schema_type}")

    def _references(self, references: list[dict[str, Any]], depth: int) -> list[Any]:
        """The registry's parsed schemas of `references` (`registry.formats.Resolved`)."""
        from registry.formats import Resolved

        if depth > MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema("references nest too deeply")
        resolved = []
        for reference in references:
            subject = quote(str(reference.get("subject")), safe="")
            body = self._call("GET", f"/subjects/{subject}/versions/{reference.get('version')}")
            codec = self._codec(body, depth + 1)
            parsed = getattr(codec, "schema", None)
            if parsed is None:
                raise errors.invalid_schema(f"reference {reference.get('name')} is "
                                            f"{codec.schema_type}")
            resolved.append(Resolved(str(reference.get("name") or ""), parsed,
                                     codec.schema_type))
        return resolved


def encode(registry: SchemaRegistry, schema_id: int, datum: Any) -> bytes:
    return registry.by_id(schema_id).encode(schema_id, datum)


def decode(registry: SchemaRegistry, data: bytes, schema_type: str = AVRO) -> Any:
    """A Kafka value written in the wire format with a schema of `schema_type`, as JSON."""
    if len(data) < 5 or data[0] != MAGIC:
        raise errors.deserialization_failed("Unknown magic byte!")
    schema_id = struct.unpack(">I", data[1:5])[0]
    codec = registry.by_id(schema_id)
    if codec.schema_type != schema_type:
        raise errors.deserialization_failed(
            f"schema {schema_id} is {codec.schema_type}, not {schema_type}")
    return codec.decode(schema_id, data)


_registry: SchemaRegistry | None = None
_registry_lock = threading.Lock()


def registry() -> SchemaRegistry:
    global _registry
    with _registry_lock:
        if _registry is None:
            ca = settings.MILLRACE_HTTP_TLS_CA
            _registry = SchemaRegistry(settings.SCHEMA_REGISTRY_URL,
                                       ssl.create_default_context(cafile=ca) if ca else True)
        return _registry


def reset_registry() -> None:
    global _registry
    with _registry_lock:
        _registry = None
