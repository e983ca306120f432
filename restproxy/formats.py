"""Embedded formats: REST JSON values to Kafka bytes (produce) and back (fetch).

binary is base64 in JSON; json is any JSON value, stored as its UTF-8 text; avro, jsonschema
and protobuf are JSON checked against a registered schema and stored in the Confluent wire
format (schemas.py, schema_codecs.py).
"""

from __future__ import annotations

import binascii
import json
from typing import Any

from . import errors, schemas
from .content_types import EmbeddedFormat


def b64decode(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.invalid_payload(f"{what} must be a base64 string")
    try:  # strict: only the alphabet and correct padding (base64's validate=True, faster)
        return binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise errors.invalid_payload(f"{what} is not valid base64: {exc}") from exc


def b64encode(value: bytes | None) -> str | None:
    return None if value is None else binascii.b2a_base64(value, newline=False).decode("ascii")


def json_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    return json.dumps(value, separators=(",", ":")).encode()


def decode_for(fmt: EmbeddedFormat, data: bytes | None) -> Any:
    """A fetched key or value as the consumer's embedded format presents it."""
    if data is None:
        return None
    if fmt is EmbeddedFormat.BINARY:
        return b64encode(data)
    if fmt is EmbeddedFormat.JSON:
        try:
            return json.loads(data)
        except ValueError as exc:
            raise errors.deserialization_failed(f"Not JSON: {exc}") from exc
    return schemas.decode(schemas.registry(), data, fmt.schema_type or schemas.AVRO)


def b64decode_value(value: Any) -> bytes | None:
    return b64decode(value, "binary data")
