"""Fetched records as the REST JSON a consumer sees, stopping at one it cannot present.

A record whose key or value the instance's embedded format cannot decode (a value that
is not JSON in a `json` consumer, bytes without the Confluent magic byte in an `avro` one)
is never skipped: the records before it are returned, and it stays the next record of its
partition, so every later read answers the error again until the client seeks past it.
The error names topic, partition and offset so that the client knows where to seek.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message

from restproxy import errors, formats
from restproxy.content_types import EmbeddedFormat


def record_json(message: Any, fmt: EmbeddedFormat) -> dict[str, Any]:
    headers = message.headers() or []
    return {
        "topic": message.topic(),
        "key": formats.decode_for(fmt, message.key()),
        "value": formats.decode_for(fmt, message.value()),
        "partition": message.partition(),
        "offset": message.offset(),
        # Beyond Confluent: timestamps and headers travel with every record.
        "timestamp": message.timestamp()[1],
        "headers": [{"name": k, "value": formats.b64encode(v)} for k, v in headers],
    }


@dataclass
class Presented:
    """The leading records that could be presented, and why the next one could not."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    error: errors.RestProxyError | None = None


def present(messages: list[Message], fmt: EmbeddedFormat) -> Presented:
    shown = Presented()
    for message in messages:
        try:
            shown.bodies.append(record_json(message, fmt))
        except errors.RestProxyError as exc:
            shown.error = at_record(exc, message)
            break
    return shown


def at_record(exc: errors.RestProxyError, message: Message) -> errors.RestProxyError:
    """The same Confluent error, naming the record and how to get past it."""
    where = f"topic {message.topic()} partition {message.partition()} offset {message.offset()}"
    text = (f"{exc.message} (record at {where}; the consumer stays at this record until "
            f"it seeks past it, to offset {message.offset() + 1})")
    return errors.RestProxyError(exc.status, exc.error_code, text)
