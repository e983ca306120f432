"""Frames and message encodings of the controller listener (no I/O of its own).

A frame is a 4-byte big-endian length and that many bytes of one UTF-8 JSON object. Every
frame is one of:

- `{"raft": MESSAGE, "from": N}`: a Raft message from voter N, one way (answers travel
  back as `raft` frames on the sender's own connection to N).
- `{"request": ID, "method": NAME, "args": {...}}`: a controller call; the answer comes
  back on the same connection as
- `{"response": ID, "error_code": E, "message": M, "result": R, "offset": O}`: `result`
  when `error_code` is 0, and `offset` is the metadata offset the answer reflects.

MESSAGE is `{"type": "vote_request" | "vote_response" | "append_request" |
"append_response" | "fetch_snapshot_request" | "fetch_snapshot_response", ...the dataclass
fields...}`, each field named and checked here, so no peer can make us build anything but
these six messages (no pickle).
"""

from __future__ import annotations

import asyncio
import json
import struct
from typing import Any

from .raft_storage import Entry
from .raft_transport import (
    AppendRequest,
    AppendResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)

MAX_FRAME_BYTES = 64 * 1024 * 1024
_LENGTH = struct.Struct(">I")


class FrameError(Exception):
    """A frame we cannot read: the connection carrying it is closed."""


def encode_frame(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return _LENGTH.pack(len(body)) + body


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next frame's object, or None at a clean end of stream."""
    try:
        header = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise FrameError("connection closed inside a frame header") from None
        return None
    (length,) = _LENGTH.unpack(header)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {length} bytes is over the limit of {MAX_FRAME_BYTES}")
    try:
        obj = json.loads(await reader.readexactly(length))
    except asyncio.IncompleteReadError:
        raise FrameError("connection closed inside a frame") from None
    except ValueError as exc:
        raise FrameError(f"frame is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FrameError("frame is not a JSON object")
    return obj


def encode_message(message: Message) -> dict[str, Any]:
    if isinstance(message, VoteRequest):
        return {"type": "vote_request", "term": message.term,
                "candidate_id": message.candidate_id,
                "last_log_offset": message.last_log_offset,
                "last_log_term": message.last_log_term, "pre_vote": message.pre_vote}
    if isinstance(message, VoteResponse):
        return {"type": "vote_response", "term": message.term, "voter_id": message.voter_id,
                "granted": message.granted, "pre_vote": message.pre_vote}
    if isinstance(message, AppendRequest):
        return {"type": "append_request", "term": message.term,
                "leader_id": message.leader_id, "prev_log_offset": message.prev_log_offset,
                "prev_log_term": message.prev_log_term,
                "entries": [{"term": e.term, "control": e.control, "record": e.record}
                            for e in message.entries],
                "leader_commit": message.leader_commit}
    if isinstance(message, AppendResponse):
        return {"type": "append_response", "term": message.term,
                "follower_id": message.follower_id, "success": message.success,
                "match_offset": message.match_offset}
    if isinstance(message, FetchSnapshotRequest):
        return {"type": "fetch_snapshot_request", "term": message.term,
                "follower_id": message.follower_id, "end_offset": message.end_offset,
                "snapshot_term": message.snapshot_term, "position": message.position}
    return {"type": "fetch_snapshot_response", "term": message.term,
            "leader_id": message.leader_id, "end_offset": message.end_offset,
            "snapshot_term": message.snapshot_term, "position": message.position,
            "records": list(message.records), "total": message.total}


def decode_message(raw: Any) -> Message:
    """The message `raw` encodes; FrameError if it is not exactly one of ours."""
    try:
        kind = raw["type"]
        if kind == "vote_request":
            return VoteRequest(_int(raw, "term"), _int(raw, "candidate_id"),
                               _int(raw, "last_log_offset"), _int(raw, "last_log_term"),
                               _bool(raw, "pre_vote"))
        if kind == "vote_response":
            return VoteResponse(_int(raw, "term"), _int(raw, "voter_id"),
                                _bool(raw, "granted"), _bool(raw, "pre_vote"))
        if kind == "append_request":
            entries = tuple(_entry(e) for e in raw["entries"])
            return AppendRequest(_int(raw, "term"), _int(raw, "leader_id"),
                                 _int(raw, "prev_log_offset"), _int(raw, "prev_log_term"),
                                 entries, _int(raw, "leader_commit"))
        if kind == "append_response":
            return AppendResponse(_int(raw, "term"), _int(raw, "follower_id"),
                                  _bool(raw, "success"), _int(raw, "match_offset"))
        if kind == "fetch_snapshot_request":
            return FetchSnapshotRequest(
                _int(raw, "term"), _int(raw, "follower_id"), _int(raw, "end_offset"),
                _int(raw, "snapshot_term"), _int(raw, "position"))
        if kind == "fetch_snapshot_response":
            return FetchSnapshotResponse(
                _int(raw, "term"), _int(raw, "leader_id"), _int(raw, "end_offset"),
                _int(raw, "snapshot_term"), _int(raw, "position"),
                tuple(_record(r) for r in raw["records"]), _int(raw, "total"))
    except (KeyError, TypeError) as exc:
        raise FrameError(f"malformed raft message: {exc!r}") from None
    raise FrameError(f"unknown raft message type {kind!r}")


def _int(raw: dict[str, Any], name: str) -> int:
    value = raw[name]
    if type(value) is not int:
        raise TypeError(f"{name} is not an integer")
    return value


def _bool(raw: dict[str, Any], name: str) -> bool:
    value = raw[name]
    if type(value) is not bool:
        raise TypeError(f"{name} is not a boolean")
    return value


def _entry(raw: Any) -> Entry:
    return Entry(_int(raw, "term"), _record(raw["record"]), _bool(raw, "control"))


def _record(record: Any) -> dict[str, Any]:
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise TypeError("a record is not a typed JSON object")
    return record
