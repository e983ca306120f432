"""Request and response framing: size prefix, request header v1/v2, response header v0/v1.

The header's client_id stays an int16-length nullable string even in header v2, so that
old brokers can parse it; flexible versions add tagged fields after it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_HEADER = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class FramingError(Exception):
    """The bytes on the connection are not a Kafka request; the connection is closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_header(frame: memoryview) -> tuple[RequestHeader, int]:
    """The fixed part of a request header and the position right after client_id."""
    if len(frame) < _HEADER.size + 2:
        raise FramingError(f"request of {len(frame)} bytes is too short for a header")
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    pos = _HEADER.size
    (length,) = _INT16.unpack_from(frame, pos)
    pos += 2
    client_id: str | None = None
    if length >= 0:
        if pos + length > len(frame):
            raise FramingError("client_id runs past the end of the request")
        try:
            client_id = bytes(frame[pos : pos + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FramingError("client_id is not UTF-8") from exc
        pos += length
    elif length != -1:
        raise FramingError(f"client_id has negative length {length}")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def read_uvarint(frame: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(frame):
            raise FramingError("unsigned varint runs past the end of the request")
        byte = frame[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise FramingError("unsigned varint is longer than 5 bytes")


def skip_tagged_fields(frame: memoryview, pos: int) -> int:
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
        if pos > len(frame):
            raise FramingError("tagged field runs past the end of the request")
    return pos


def encode_response(correlation_id: int, body: bytes, *, flexible_header: bool) -> bytes:
    """A framed response: size, header v0 (or v1 with an empty tag buffer), body."""
    header = _INT32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    return _INT32.pack(len(header) + len(body)) + header + body
