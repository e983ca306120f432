"""How the message browser shows a record's bytes, and how it encodes what a user produces.

A key, value or header is shown as the first of these that fits:
- `avro`, `jsonschema`, `protobuf`: the Confluent wire format (magic byte 0, a 4-byte
  big-endian schema id, then the value in the schema's format: `wireformats.py`) whose
  schema id the registry knows, decoded with that schema and shown as JSON (Protobuf as
  its canonical proto3 JSON, with the message's name);
- `json`: UTF-8 text that parses as JSON, pretty-printed;
- `text`: other UTF-8 text;
- `binary`: anything else, as hex and base64.
Schemas come from the registry app in-process (the same database), so decoding costs no
HTTP round trip; a schema id the registry does not know leaves the bytes `binary`, with a
note saying so.

Producing with a schema (a subject's latest version, or a schema id) takes JSON, checks it
against the schema and writes it in the wire format; `EncodeError` carries the schema
library's own words for a value that does not fit.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from controlcenter import wireformats
from controlcenter.wireformats import WireError
from registry import errors as registry_errors
from registry import formats, lookups
from registry.formats import ParsedSchema
from registry.models import Schema
from registry.params import LATEST

MAGIC = wireformats.MAGIC
# The browser's name for each schema type: the REST proxy's embedded format names.
KINDS = {formats.AVRO: "avro", formats.JSON: "jsonschema", formats.PROTOBUF: "protobuf"}
LABELS = {"jsonschema": "JSON Schema"}


@dataclass(frozen=True)
class Rendered:
    """One key, value or header as the browser shows it."""

    kind: str  # "null", "avro", "jsonschema", "protobuf", "json", "text" or "binary"
    text: str  # what the page shows (pretty JSON for the schema formats and json)
    base64: str = ""  # the raw bytes, always available to copy
    schema_id: int | None = None
    note: str = ""
    message_type: str = ""  # protobuf: the message's full name

    @property
    def hex(self) -> str:
        return base64.b64decode(self.base64).hex(" ") if self.base64 else ""

    @property
    def label(self) -> str:
        """The badge's word for the kind."""
        return LABELS.get(self.kind, self.kind)

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"format": self.kind, "text": self.text, "base64": self.base64}
        if self.schema_id is not None:
            body["schema_id"] = self.schema_id
        if self.message_type:
            body["message_type"] = self.message_type
        if self.note:
            body["note"] = self.note
        return body


NULL = Rendered("null", "")


@dataclass(frozen=True)
class KnownSchema:
    """A registered schema as the codec uses it."""

    schema_id: int
    schema_type: str
    parsed: ParsedSchema


class Decoder:
    """Decodes bytes for one request, caching the parsed schemas it meets."""

    def __init__(self) -> None:
        self._schemas: dict[int, KnownSchema | None] = {}

    def render(self, data: bytes | None) -> Rendered:
        if data is None:
            return NULL
        raw = base64.b64encode(data).decode()
        if len(data) >= 5 and data[0] == MAGIC:
            schema_id = struct.unpack(">I", data[1:5])[0]
            decoded = self._framed(schema_id, data[5:], raw)
            if decoded is not None:
                return decoded
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return Rendered("binary", data.hex(" "), raw)
        if text.isprintable() or all(c.isprintable() or c in "\r\n\t" for c in text):
            return _text_or_json(text, raw)
        return Rendered("binary", data.hex(" "), raw)

    def _framed(self, schema_id: int, body: bytes, raw: str) -> Rendered | None:
        known = self._schema(schema_id)
        if known is None:
            return None
        try:
            decoded = wireformats.read(known.schema_type, known.parsed, body)
        except Exception as exc:  # noqa: BLE001 - fastavro and protobuf raise many types for misfits
            return Rendered("binary", _hex(raw), raw, schema_id,
                            f"not readable with schema {schema_id}: {type(exc).__name__}"
                            f"{': ' + str(exc) if isinstance(exc, WireError) else ''}")
        return Rendered(KINDS[known.schema_type], pretty(decoded.datum), raw, schema_id,
                        decoded.note, decoded.message_type)

    def _schema(self, schema_id: int) -> KnownSchema | None:
        if schema_id not in self._schemas:
            row = Schema.objects.filter(id=schema_id, versions__isnull=False).first()
            self._schemas[schema_id] = None if row is None else _known(row)
        return self._schemas[schema_id]


def _known(row: Schema) -> KnownSchema | None:
    if row.schema_type not in KINDS:
        return None
    try:
        return KnownSchema(row.id, row.schema_type, lookups.parsed_schema(row))
    except registry_errors.RegistryError:
        return None


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


@dataclass(frozen=True)
class Encoded:
    value: bytes
    schema_id: int
    kind: str  # "avro", "jsonschema" or "protobuf"
    message_type: str = ""


def encode(text: str, subject: str = "", schema_id: int | None = None,
           message_type: str = "") -> Encoded:
    """JSON text in the Confluent wire format, with the latest schema of `subject` or the
    schema `schema_id` (one of the two); EncodeError in the schema's words if it does not
    fit. `message_type` names a Protobuf message (default: the schema's first)."""
    where, known = _schema_for(subject, schema_id)
    try:
        datum = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise EncodeError(f"not valid JSON: {exc}") from exc
    if message_type and known.schema_type != formats.PROTOBUF:
        raise EncodeError(f"a message type is for Protobuf; {where} is "
                          f"{LABELS.get(KINDS[known.schema_type], KINDS[known.schema_type])}")
    try:
        value = wireformats.write(known.schema_type, known.parsed, known.schema_id, datum,
                                  message_type)
    except WireError as exc:
        raise EncodeError(f"does not match {where}: {exc}") from exc
    chosen = ""
    if known.schema_type == formats.PROTOBUF:
        chosen = message_type.lstrip(".") or wireformats.message_types(known.parsed.parsed)[0]
    return Encoded(value, known.schema_id, KINDS[known.schema_type], chosen)


def _schema_for(subject: str, schema_id: int | None) -> tuple[str, KnownSchema]:
    """(how to name it in an error, the schema) for a subject's latest version or an id."""
    subject = subject.strip()
    if bool(subject) == (schema_id is not None):
        raise EncodeError("Give either a subject or a schema id.")
    try:
        if schema_id is None:
            version = lookups.subject_version(subject, LATEST)
            row, where = version.schema, f"subject {subject} version {version.version}"
        else:
            found = Schema.objects.filter(id=schema_id, versions__isnull=False).first()
            if found is None:
                raise EncodeError(f"Schema {schema_id} not found.")
            row, where = found, f"schema {schema_id}"
        known = _known_or_refused(row)
    except registry_errors.RegistryError as exc:
        raise EncodeError(exc.message) from exc
    return where, known


def _known_or_refused(row: Schema) -> KnownSchema:
    if row.schema_type not in KINDS:
        raise EncodeError(f"schema type {row.schema_type} cannot be produced here")
    return KnownSchema(row.id, row.schema_type, lookups.parsed_schema(row))


def encode_avro(subject: str, text: str) -> tuple[bytes, int]:
    """JSON text with the latest schema of `subject` (any of the three formats, despite the
    name, which callers from before JSON Schema and Protobuf use)."""
    encoded = encode(text, subject=subject)
    return encoded.value, encoded.schema_id
