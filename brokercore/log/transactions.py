"""Transaction markers and the per-segment transaction index (`<base>.txnindex`).

A transaction ends in every partition it wrote to with a control batch written by that
partition's leader: one record whose key is the marker type (0 abort, 1 commit) and whose
value carries the transaction coordinator's epoch, as in Kafka. A read_committed consumer
skips the records of aborted transactions, which it finds through the aborted transactions
a fetch returns; the log keeps those in a transaction index next to the segment that holds
the abort marker.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from brokercore.log.records import (
    CONTROL_FLAG,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_FLAG,
    Buffer,
    RecordBatchHeader,
    _restamp_crc,
    decode_records,
    encode_record,
)

ABORT, COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
_CONTROL_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def build_control_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """An end-transaction marker batch (base offset 0, to be stamped on append)."""
    record = encode_record(0, 0, _CONTROL_KEY.pack(0, COMMIT if commit else ABORT),
                           _CONTROL_VALUE.pack(0, coordinator_epoch))
    size = HEADER_SIZE + len(record)
    out = bytearray(HEADER.pack(
        0, size - LOG_OVERHEAD, -1, 2, 0, TRANSACTIONAL_FLAG | CONTROL_FLAG, 0,
        timestamp_ms, timestamp_ms, producer_id, producer_epoch, -1, 1))
    out += record
    _restamp_crc(out, 0, len(out))
    return bytes(out)


@dataclass(frozen=True, slots=True)
class ControlMarker:
    commit: bool
    coordinator_epoch: int


def read_control_marker(batch: Buffer, header: RecordBatchHeader) -> ControlMarker | None:
    """The marker a control batch carries; None for control types other than commit/abort."""
    records = decode_records(batch, header)
    if not records or records[0].key is None or len(records[0].key) < _CONTROL_KEY.size:
        return None
    _, kind = _CONTROL_KEY.unpack_from(records[0].key)
    if kind not in (ABORT, COMMIT):
        return None
    raw = records[0].raw
    epoch = -1
    if len(raw) >= _CONTROL_VALUE.size:
        _, epoch = _CONTROL_VALUE.unpack_from(raw, len(raw) - 1 - _CONTROL_VALUE.size)
    return ControlMarker(kind == COMMIT, epoch)


def marker_of(batch: Buffer, header: RecordBatchHeader) -> ControlMarker | None:
    """The marker of a control batch; None for any other batch."""
    return read_control_marker(batch, header) if header.is_control else None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a control batch ended: data from first_offset, marker at last_offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction of a partition: its data lies in [first_offset, last_offset]
    (the marker's offset), and the last stable offset once it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """``<base>.txnindex``: the aborted transactions whose abort marker lies in the segment.

    On-disk format (Kafka's): 34-byte entries back to back, each int16 version (0), int64
    producer id, int64 first offset, int64 last offset, int64 last stable offset. The file
    exists only once an entry is written; entries are appended as markers are, and the
    whole index is rebuilt from the log on recovery (see ``recovery.rebuild_producer_state``).
    """

    ENTRY = struct.Struct(">hqqqq")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        usable = len(data) - len(data) % self.ENTRY.size
        for position in range(0, usable, self.ENTRY.size):
            _, *fields = self.ENTRY.unpack_from(data, position)
            self.entries.append(AbortedTxn(*fields))

    def append(self, entry: AbortedTxn) -> None:
        self.entries.append(entry)
        with self.path.open("ab") as file:
            file.write(self.ENTRY.pack(0, entry.producer_id, entry.first_offset,
                                       entry.last_offset, entry.last_stable_offset))

    def add_if_aborted(self, done: CompletedTxn, first_unstable_offset: int | None) -> None:
        """Record a transaction that ended in this segment if it was aborted, with the last
        stable offset once it ended (`first_unstable_offset`, None when none is open)."""
        if done.aborted:
            stable = done.last_offset + 1 if first_unstable_offset is None \
                else first_unstable_offset
            self.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                   stable))

    def reset(self) -> None:
        self.entries = []
        self.delete_file()

    def fsync(self) -> None:
        if self.entries:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete_file(self) -> None:
        self.path.unlink(missing_ok=True)

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Entries whose data may lie in [start, end)."""
        return [e for e in self.entries if e.last_offset >= start and e.first_offset < end]
