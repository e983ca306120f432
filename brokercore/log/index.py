"""Sparse per-segment indexes: ``.index`` (offset → position) and ``.timeindex``.

Both are held in memory (two parallel lists) and appended to their files lazily, on
roll, flush and close. That keeps appends to a single write(); an index that is behind
its log after a crash is harmless because recovery rebuilds the indexes of every
segment past the recovery point, and any index that fails its sanity check.
"""

from __future__ import annotations

import itertools
import os
import struct
from bisect import bisect_right
from pathlib import Path


class SparseIndex:
    """Sorted (key, value) entries in a file of fixed-size big-endian records.

    Not thread-safe: owned by the partition log's event loop, like the segment.
    """

    ENTRY = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        self.keys: list[int] = []
        self.values: list[int] = []
        self._written = 0  # entries already in the file

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def floor(self, key: int) -> int:
        """Index of the last entry with entry key <= key, or -1."""
        return bisect_right(self.keys, key) - 1

    def load(self) -> bool:
        """Read the file; False if it is missing or fails the sanity check (then rebuild)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % self.ENTRY.size:
            return False
        entries = list(self.ENTRY.iter_unpack(data))
        self.keys = [entry[0] for entry in entries]
        self.values = [entry[1] for entry in entries]
        self._written = len(entries)
        return True

    def write_pending(self) -> None:
        """Append entries not yet in the file (on roll, flush and close)."""
        pending = [
            self.ENTRY.pack(key, value)
            for key, value in zip(
                self.keys[self._written :], self.values[self._written :], strict=True
            )
        ]
        if pending or not self.path.exists():
            with self.path.open("ab") as file:
                file.write(b"".join(pending))
        self._written = len(self.keys)

    def fsync(self) -> None:
        self.write_pending()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def reset(self) -> None:
        self.keys.clear()
        self.values.clear()
        self.path.write_bytes(b"")
        self._written = 0

    def delete_file(self) -> None:
        self.path.unlink(missing_ok=True)


class OffsetIndex(SparseIndex):
    """``<base>.index``: 8-byte entries, int32 offset relative to the segment's base
    offset and int32 byte position of that batch in the ``.log``. An entry is added
    before a batch once ``index.interval.bytes`` have been written since the last one,
    so lookups land at most that many bytes before the wanted batch. Keys and
    positions strictly increase.
    """

    ENTRY = struct.Struct(">ii")

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if not self.keys or relative > self.keys[-1]:
            self.keys.append(relative)
            self.values.append(position)

    def lookup(self, offset: int) -> int:
        """Byte position of the last indexed batch starting at or before ``offset``."""
        slot = self.floor(offset - self.base_offset)
        return self.values[slot] if slot >= 0 else 0

    def is_sane(self, log_size: int) -> bool:
        keys, positions = self.keys, self.values
        ordered = all(a < b for a, b in itertools.pairwise(keys)) and all(
            a < b for a, b in itertools.pairwise(positions)
        )
        in_range = not keys or (keys[0] >= 0 and positions[0] >= 0 and positions[-1] < log_size)
        return ordered and in_range


class TimeIndex(SparseIndex):
    """``<base>.timeindex``: 12-byte entries, int64 timestamp and int32 relative offset.

    An entry (t, o) says the largest timestamp in batches up to the one at offset o is
    t; timestamps and offsets never decrease. The last entry always carries the
    segment's largest timestamp once the segment is rolled or the log is closed.
    """

    ENTRY = struct.Struct(">qi")

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if timestamp < 0:
            return
        relative = offset - self.base_offset
        if not self.keys or timestamp > self.keys[-1]:
            self.keys.append(timestamp)
            self.values.append(relative)

    def lookup(self, timestamp: int) -> int:
        """An offset from which to scan for the first batch with maxTimestamp >= timestamp."""
        slot = self.floor(timestamp)
        return self.base_offset + self.values[slot] if slot >= 0 else self.base_offset

    def is_sane(self, next_offset: int) -> bool:
        keys, offsets = self.keys, self.values
        ordered = all(a <= b for a, b in itertools.pairwise(keys)) and all(
            a <= b for a, b in itertools.pairwise(offsets)
        )
        return ordered and (
            not offsets
            or (
                offsets[0] >= 0
                and self.base_offset + offsets[-1] < max(next_offset, self.base_offset + 1)
            )
        )

    @property
    def last_timestamp(self) -> int:
        return self.keys[-1] if self.keys else -1
