"""How the message browser shows a record's bytes, and how it encodes what a user produces.

A key, value or header is shown as the first of these that fits:
- `avro`: the Confluent wire format (magic byte 0, a 4-byte big-endian schema id, Avro
  binary) whose schema id the registry knows, decoded with that schema and shown as JSON;
- `json`: UTF-8 text that parses as JSON, pretty-printed;
- `text`: other UTF-8 text;
- `binary`: anything else, as hex and base64.
Schemas come from the registry app in-process (the same database), so decoding costs no
HTTP round trip; a schema id the registry does not know leaves the bytes `binary`, with a
note saying so.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import struct
import uuid
from dataclasses import dataclass
from typing import Any

import fastavro
import fastavro.validation

from registry import errors as registry_errors
from registry import lookups
from registry.models import Schema
from registry.params import LATEST

MAGIC = 0


@dataclass(frozen=True)
class Rendered:
    """One key, value or header as the browser shows it."""

    kind: str  # "null", "avro", "json", "text" or "binary"
    text: str  # what the page shows (pretty JSON for avro and json)
    base64: str = ""  # the raw bytes, always available to copy
    schema_id: int | None = None
    note: str = ""

    @property
    def hex(self) -> str:
        return base64.b64decode(self.base64).hex(" ") if self.base64 else ""

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"format": self.kind, "text": self.text, "base64": self.base64}
        if self.schema_id is not None:
            body["schema_id"] = self.schema_id
        if self.note:
            body["note"] = self.note
        return body


NULL = Rendered("null", "")


class Decoder:
    """Decodes bytes for one request, caching the parsed schemas it meets."""

    def __init__(self) -> None:
        self._schemas: dict[int, Any] = {}

    def render(self, data: bytes | None) -> Rendered:
        if data is None:
            return NULL
        raw = base64.b64encode(data).decode()
        if len(data) >= 5 and data[0] == MAGIC:
            schema_id = struct.unpack(">I", data[1:5])[0]
            avro = self._avro(schema_id, data[5:], raw)
            if avro is not None:
                return avro
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return Rendered("binary", data.hex(" "), raw)
        if text.isprintable() or all(c.isprintable() or c in "\r\n\t" for c in text):
            return _text_or_json(text, raw)
        return Rendered("binary", data.hex(" "), raw)

    def _avro(self, schema_id: int, body: bytes, raw: str) -> Rendered | None:
        parsed = self._schema(schema_id)
        if parsed is None:
            return None
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(body), parsed, None)
        except Exception as exc:  # fastavro raises many types for bytes that do not fit
            return Rendered("binary", _hex(raw), raw, schema_id,
                            f"not readable with schema {schema_id}: {type(exc).__name__}")
        return Rendered("avro", pretty(datum), raw, schema_id)

    def _schema(self, schema_id: int) -> Any:
        if schema_id not in self._schemas:
            row = Schema.objects.filter(id=schema_id, versions__isnull=False).first()
            try:
                self._schemas[schema_id] = (None if row is None or row.schema_type != "AVRO"
                                            else lookups.parsed_schema(row).parsed)
            except registry_errors.RegistryError:
                self._schemas[schema_id] = None
        return self._schemas[schema_id]


def _text_or_json(text: str, raw: str) -> Rendered:
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null"):
        try:
            return Rendered("json", pretty(json.loads(text)), raw)
        except ValueError:
            pass
    return Rendered("text", text, raw)


def _hex(raw: str) -> str:
    return base64.b64decode(raw).hex(" ")


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    """Avro's logical types and bytes, as their JSON encoding would show them."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class EncodeError(ValueError):
    """What the user typed does not fit: the message says why, for the form."""


def encode_avro(subject: str, text: str) -> tuple[bytes, int]:
    """JSON text as the latest schema of `subject` in the Confluent wire format."""
    try:
        version = lookups.subject_version(subject, LATEST)
        parsed = lookups.parsed_schema(version.schema).parsed
    except registry_errors.RegistryError as exc:
        raise EncodeError(exc.message) from exc
    try:
        datum = json.loads(text)
    except ValueError as exc:
        raise EncodeError(f"not valid JSON: {exc}") from exc
    out = io.BytesIO()
    out.write(struct.pack(">bI", MAGIC, version.schema_id))
    try:
        fastavro.validation.validate(datum, parsed, raise_errors=True)
        fastavro.schemaless_writer(out, parsed, datum)
    except Exception as exc:  # fastavro's validation errors have no common base class
        raise EncodeError(f"does not match subject {subject} version {version.version}: "
                          f"{exc}") from exc
    return out.getvalue(), version.schema_id
