"""One log segment: a ``.log`` file of record batches plus its two sparse indexes."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

from brokercore.log.config import LogConfig
from brokercore.log.errors import CorruptRecordError, UnsupportedMessageFormatError
from brokercore.log.index import OffsetIndex, TimeIndex
from brokercore.log.records import (
    HEADER_SIZE,
    INT32_MAX,
    Buffer,
    RecordBatchHeader,
    crc_ok,
    read_header,
)
from brokercore.log.transactions import TransactionIndex

HEADER_WINDOW = 8 * 1024
RECOVERY_CHUNK = 8 * 1024 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


@dataclasses.dataclass(frozen=True, slots=True)
class FoundBatch:
    position: int
    header: RecordBatchHeader


class LogSegment:
    """Batches ``[base_offset, next_offset)`` of one partition, in three files named by
    the 20-digit zero-padded base offset:

    - ``<base>.log``: RecordBatch v2 batches back to back, byte for byte as appended
      (baseOffset and partitionLeaderEpoch stamped by the leader). No segment header.
    - ``<base>.index`` and ``<base>.timeindex``: see ``OffsetIndex`` and ``TimeIndex``.
    - ``<base>.txnindex``: the aborted transactions whose marker lies here, only once there
      is one (``TransactionIndex``); rebuilt with the producer state after a crash.

    The log file is opened O_APPEND; an append is one write() of all the batches of a
    record set. ``recover()`` rescans the file, checks every CRC, rebuilds both
    indexes and cuts the file at the first torn or corrupt batch.

    Not thread-safe: owned by the partition log's event loop.
    """

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> None:
        self.base_offset = base_offset
        self.log_path = directory / (segment_name(base_offset) + ".log")
        self.config = config
        self.index = OffsetIndex(
            self.log_path.with_suffix(".index"), base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            self.log_path.with_suffix(".timeindex"), base_offset, config.segment_index_bytes
        )
        self.txn_index = TransactionIndex(self.log_path.with_suffix(".txnindex"))
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # base offset of the batch holding max_timestamp
        self.first_batch_timestamp = -1
        self.created_ms = now_ms
        self._bytes_since_index = 0
        self.dirty = False

    # -- loading ---------------------------------------------------------------

    def load(self) -> bool:
        """Trust the files after a clean shutdown; False if the indexes need a rebuild."""
        if not (self.index.load() and self.time_index.load()):
            return False
        if not self.index.is_sane(self.size) or not self._last_index_entry_matches():
            return False
        last = None
        for found in self.headers_from(self.index.lookup(2**62)):
            last = found
        if last is not None:
            self.next_offset = last.header.next_offset
            self._bytes_since_index = self.size - self.index.lookup(2**62)
        if not self.time_index.is_sane(self.next_offset):
            return False
        self.max_timestamp = self.time_index.last_timestamp
        if self.time_index.values:
            self.offset_of_max_timestamp = self.base_offset + self.time_index.values[-1]
        first = next(self.headers_from(0), None)
        self.first_batch_timestamp = first.header.max_timestamp if first else -1
        return True

    def _last_index_entry_matches(self) -> bool:
        if not self.index.keys:
            return True
        raw = os.pread(self._fd, HEADER_SIZE, self.index.values[-1])
        if len(raw) < HEADER_SIZE or raw[16] != 2:
            return False
        header = RecordBatchHeader.unpack(raw)
        return header.base_offset == self.base_offset + self.index.keys[-1]

    def recover(self) -> int:
        """Rescan the whole file; returns the number of bytes cut from a bad tail."""
        self.index.reset()
        self.time_index.reset()
        self.next_offset, self.max_timestamp, self.offset_of_max_timestamp = (
            self.base_offset,
            -1,
            -1,
        )
        self.first_batch_timestamp, self._bytes_since_index = -1, 0
        file_size = os.fstat(self._fd).st_size
        position, self.size = 0, 0
        for found in self._scan_valid(file_size):
            self._track(found.position, found.header)
            position = found.position + found.header.size
        self.size = position
        if position < file_size:
            os.ftruncate(self._fd, position)
        self.index.write_pending()
        self.time_index.write_pending()
        return file_size - position

    def _scan_valid(self, file_size: int) -> Iterator[FoundBatch]:
        """Whole CRC-valid batches with increasing offsets, up to the first bad one."""
        position, expected = 0, self.base_offset
        window, window_start = b"", 0
        while position < file_size:
            rel = position - window_start
            if rel + HEADER_SIZE > len(window):
                window, window_start, rel = self._window(position, HEADER_SIZE), position, 0
            if len(window) - rel >= 12:
                total = int.from_bytes(window[rel + 8 : rel + 12], "big", signed=True) + 12
                if rel + total > len(window) and position + total <= file_size:
                    window, window_start, rel = self._window(position, total), position, 0
            try:
                header = read_header(window, rel, len(window))
            except (CorruptRecordError, UnsupportedMessageFormatError):
                return
            if header.base_offset < expected or not crc_ok(window, rel, header):
                return
            yield FoundBatch(position, header)
            position, expected = position + header.size, header.next_offset

    def _window(self, position: int, need: int) -> bytes:
        return os.pread(self._fd, max(RECOVERY_CHUNK, need), position)

    # -- appending -------------------------------------------------------------

    def append(self, data: Buffer, batches: list[FoundBatch]) -> None:
        """Write a validated, stamped record set; ``positions`` are relative to ``data``."""
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(self._fd, view[written:])
        start = self.size
        for found in batches:
            self._track(start + found.position, found.header)
        self.size = start + len(data)
        self.dirty = True

    def _track(self, position: int, header: RecordBatchHeader) -> None:
        if self._bytes_since_index >= self.config.index_interval_bytes or not self.index.keys:
            self.index.append(header.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = (
                header.max_timestamp,
                header.base_offset,
            )
        if self.first_batch_timestamp < 0:
            self.first_batch_timestamp = header.max_timestamp
        self.next_offset = header.next_offset

    def should_roll(
        self, incoming_bytes: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        if self.size == 0:
            return False
        if self.size + incoming_bytes > self.config.segment_bytes:
            return True
        if self.index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > INT32_MAX:
            return True
        if self.first_batch_timestamp >= 0 and max_timestamp >= 0:
            waited = max_timestamp - self.first_batch_timestamp
        else:
            waited = now_ms - self.created_ms
        return waited > self.config.segment_ms

    def seal(self) -> None:
        """On roll and close: the final time-index entry carries the largest timestamp."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.write_pending()
        self.time_index.write_pending()

    # -- reading ---------------------------------------------------------------

    def headers_from(self, position: int) -> Iterator[FoundBatch]:
        """Batch headers from ``position`` to the end, read a window at a time."""
        while position + HEADER_SIZE <= self.size:
            window = os.pread(self._fd, min(HEADER_WINDOW, self.size - position), position)
            rel = 0
            while rel + HEADER_SIZE <= len(window):
                header = RecordBatchHeader.unpack(window, rel)
                if header.magic != 2 or header.batch_length < HEADER_SIZE - 12:
                    return
                yield FoundBatch(position + rel, header)
                rel += header.size
            position += rel

    def find(self, offset: int) -> FoundBatch | None:
        """The first batch whose last offset is >= ``offset`` (it contains ``offset``
        unless compaction left a gap there)."""
        for found in self.headers_from(self.index.lookup(offset)):
            if found.header.last_offset >= offset:
                return found
        return None

    def read_bytes(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def read_from(
        self, start: FoundBatch, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> bytes | memoryview:
        """Whole batches from ``start``: one pread of up to ``max_bytes``, cut back to the
        last whole batch below ``max_offset`` (or widened to one oversized batch)."""
        if start.header.base_offset >= max_offset:
            return b""
        if start.header.size > max_bytes:
            return self.read_bytes(start.position, start.header.size) if min_one_batch else b""
        chunk = self.read_bytes(start.position, min(max_bytes, self.size - start.position))
        end = 0
        while end + HEADER_SIZE <= len(chunk):
            header = RecordBatchHeader.unpack(chunk, end)
            if header.base_offset >= max_offset or end + header.size > len(chunk):
                break
            end += header.size
        return memoryview(chunk)[:end] if end < len(chunk) else chunk

    # -- truncation, durability, removal --------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and all after it; returns bytes removed."""
        found = self.find(offset)
        if found is None:
            return 0
        removed = self.size - found.position
        os.ftruncate(self._fd, found.position)
        self.recover()
        return removed

    def flush(self) -> None:
        os.fsync(self._fd)
        self.index.fsync()
        self.time_index.fsync()
        self.txn_index.fsync()
        self.dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            self.seal()
            os.close(self._fd)
            self._fd = -1

    def abandon(self) -> None:
        """Close the file without writing anything: its dir has failed."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.log_path.unlink(missing_ok=True)
        self.index.delete_file()
        self.time_index.delete_file()
        self.txn_index.delete_file()

    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)
