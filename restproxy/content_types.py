"""Content negotiation for the v2 API: embedded formats in Content-Type and Accept.

Confluent names the embedded data format inside the media type:
`application/vnd.kafka.{binary,json,avro,jsonschema,protobuf}.v2+json`. Metadata endpoints speak
`application/vnd.kafka.v2+json`; `application/json` (and `*/*`) are generic fallbacks.
"""

from __future__ import annotations

import enum
import re

from . import errors

V2_JSON = "application/vnd.kafka.v2+json"
V3_JSON = "application/json"


class EmbeddedFormat(enum.Enum):
    BINARY = "binary"
    JSON = "json"
    AVRO = "avro"
    JSONSCHEMA = "jsonschema"
    PROTOBUF = "protobuf"

    @property
    def schema_type(self) -> str | None:
        """The registry's `schemaType` of a format whose data has a registered schema."""
        return _SCHEMA_TYPES.get(self.value)

    @property
    def v2_media_type(self) -> str:
        return f"application/vnd.kafka.{self.value}.v2+json"


_SCHEMA_TYPES = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}
_VND = re.compile(
    r"^application/vnd\.kafka(?:\.(?P<fmt>[a-z]+))?(?:\.(?P<ver>v[12]))?\+json$"
)
_GENERIC = {"application/json", "application/octet-stream", "*/*", "application/*"}


def parse_media_ranges(header: str) -> list[tuple[str, float]]:
    """Media ranges of an Accept header, best first (ties keep header order)."""
    ranges: list[tuple[str, float]] = []
    for part in header.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        quality = 1.0
        for param in pieces[1:]:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            ranges.append((pieces[0].lower(), quality))
    return sorted(ranges, key=lambda item: -item[1])


def _format_of(media_type: str) -> EmbeddedFormat | str | None:
    """The embedded format a vnd.kafka media type names; None for plain; 'bad' otherwise."""
    match = _VND.match(media_type)
    if match is None:
        return "bad"
    if match.group("fmt") is None:
        return None
    try:
        return EmbeddedFormat(match.group("fmt"))
    except ValueError:
        return "bad"


def produce_format(content_type: str | None) -> EmbeddedFormat:
    """The embedded format of a v2 produce request; 415 for anything else."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    if media_type in _GENERIC:
        return EmbeddedFormat.BINARY
    found = _format_of(media_type)
    if isinstance(found, EmbeddedFormat):
        return found
    raise errors.unsupported_media_type(media_type)


def check_json_body(content_type: str | None) -> None:
    """Non-produce v2 bodies: the plain vnd.kafka or generic JSON types, else 415."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    if not media_type or media_type in _GENERIC or _format_of(media_type) is None:
        return
    raise errors.unsupported_media_type(media_type)


def accepts_metadata(accept: str | None) -> bool:
    """Whether a metadata (non-record) response can be sent to this Accept header."""
    if not accept:
        return True
    for media_type, _quality in parse_media_ranges(accept):
        if media_type in _GENERIC:
            return True
        # Any vnd.kafka type answers metadata requests, as Confluent does.
        if _format_of(media_type) != "bad":
            return True
    return False


def _accepted(accept: str, instance_format: EmbeddedFormat, framings: tuple[str, ...]) -> str:
    """The first acceptable range: one of `framings`, or "" for the instance's own format.

    Records of a consumer are sent in its own format; naming a different one is 40601.
    """
    saw_other = False
    for media_type, _quality in parse_media_ranges(accept):
        if media_type in framings:
            return media_type
        if media_type in _GENERIC:
            return ""
        found = _format_of(media_type)
        if found is None or found == instance_format:
            return ""
        if isinstance(found, EmbeddedFormat):
            saw_other = True
    if saw_other:
        raise errors.format_mismatch()
    raise errors.not_acceptable()


def fetch_format(accept: str | None, instance_format: EmbeddedFormat) -> EmbeddedFormat:
    """Records of a consumer are sent in its own format; a different one is 40601."""
    if accept:
        _accepted(accept, instance_format, ())
    return instance_format


NDJSON = "application/x-ndjson"
EVENT_STREAM = "text/event-stream"


def stream_media_type(accept: str | None, instance_format: EmbeddedFormat) -> str:
    """How a record stream is framed: NDJSON unless Accept prefers server-sent events.

    The records inside keep the instance's embedded format, so naming another one in
    Accept is 40601, as for a fetch.
    """
    if not accept:
        return NDJSON
    return _accepted(accept, instance_format, (NDJSON, EVENT_STREAM)) or NDJSON
