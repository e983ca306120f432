"""The segment files of one partition's directory, Kafka's LocalLog."""

from __future__ import annotations

import logging
import shutil
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from brokercore.clock import Clock
from brokercore.log.checkpoint import fsync_directory
from brokercore.log.config import LogConfig
from brokercore.log.epoch_cache import LeaderEpochCache
from brokercore.log.records import Buffer, decode_records
from brokercore.log.segment import FoundBatch, LogSegment
from brokercore.log.transactions import AbortedTxn

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchData:
    records: bytes | memoryview  # whole v2 batches, exactly as stored
    first_offset: int  # base offset of the first batch returned, -1 if none


class LocalLog:
    """``<base>.log``, ``<base>.index``, ``<base>.timeindex`` and, once it holds an abort,
    ``<base>.txnindex`` per segment (``LogSegment``), ordered by base offset; the
    highest-based segment is the active one, the only one appended to.

    It writes batches that are already stamped, rolls, fsyncs (the segments, then the
    leader-epoch checkpoint, then the recovery point moves: recovery re-learns epochs only
    past it) and reads whole batches back. What is written, and where the log starts, is
    `PartitionLog`'s to decide: this class knows no producer and no log start, and is
    handed the log start where a read must skip what lies below it.

    Not thread-safe: owned by one event loop; every method is synchronous.
    """

    def __init__(self, directory: Path, config: LogConfig, clock: Clock,
                 epochs: LeaderEpochCache) -> None:
        self.directory = directory
        self.config = config
        self.clock = clock
        self.epochs = epochs
        self.segments: list[LogSegment] = []
        self.recovery_point = 0  # everything below it is fsynced
        self.new_directory = False  # created without fsync; the first flush syncs its entry
        self._unflushed_messages = 0
        self._last_flush_ms = clock.time_ms()

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.config = config

    # -- writes ----------------------------------------------------------------

    def write(self, buf: Buffer, batches: list[FoundBatch], now: int) -> None:
        first, last = batches[0].header, batches[-1].header
        max_timestamp = max(found.header.max_timestamp for found in batches)
        segment = self.active_segment
        if segment.should_roll(len(buf), max_timestamp, last.last_offset, now):
            self.roll(first.base_offset)
            segment = self.active_segment
        elif segment.size == 0 and first.base_offset != segment.base_offset:
            self._replace_empty_active(first.base_offset)
            segment = self.active_segment
        segment.append(buf, batches)
        self._unflushed_messages += sum(found.header.records_count for found in batches)
        if (
            self._unflushed_messages >= self.config.flush_messages
            or now - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()

    def _replace_empty_active(self, base_offset: int) -> None:
        """A follower append past a gap: the empty active segment moves to the new base."""
        self.segments.pop().delete()
        self.segments.append(self.new_segment(base_offset))

    def roll(self, base_offset: int | None = None) -> None:
        """Close the active segment (if it holds data) and start one at the log end."""
        active = self.active_segment
        if active.size == 0:
            return
        active.seal()
        self.flush()
        self.segments.append(
            self.new_segment(self.log_end_offset if base_offset is None else base_offset)
        )

    def new_segment(self, base_offset: int) -> LogSegment:
        segment = LogSegment(self.directory, base_offset, self.config, self.clock.time_ms())
        segment.seal()
        return segment

    def flush_if_due(self) -> bool:
        due = self.clock.time_ms() - self._last_flush_ms >= self.config.flush_ms
        if self._unflushed_messages and due:
            self.flush()
            return True
        return False

    def flush(self) -> None:
        """fsync every segment with unflushed writes, then move the recovery point."""
        for segment in self.segments:
            if segment.dirty:
                segment.flush()
        if self.epochs.dirty:  # recovery re-learns epochs only past the recovery point
            self.epochs.persist()
        self.recovery_point = self.log_end_offset
        if self.new_directory:
            fsync_directory(self.directory.parent)
            self.new_directory = False
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.time_ms()

    # -- reads -----------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, limit: int,
             min_one_batch: bool) -> FetchData:
        """Whole batches from the one containing ``fetch_offset``, never one starting at or
        beyond ``limit``; at least one batch if ``min_one_batch``."""
        for segment in self.segments[self._segment_slot(fetch_offset) :]:
            found = segment.find(fetch_offset)
            if found is None:
                continue
            if found.header.base_offset >= limit:
                break
            data = segment.read_from(found, max_bytes, limit, min_one_batch)
            return FetchData(data, found.header.base_offset if data else -1)
        return FetchData(b"", -1)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start, end). Each is indexed by the segment
        holding its marker, which is at or after ``start``."""
        found: list[AbortedTxn] = []
        for segment in self.segments[self._segment_slot(start) :]:
            if segment.base_offset >= end and found:
                break
            found += segment.txn_index.overlapping(start, end)
        return found

    def _segment_slot(self, offset: int) -> int:
        bases = [segment.base_offset for segment in self.segments]
        return max(0, bisect_right(bases, offset) - 1)

    def batches(self, start_offset: int = 0) -> Iterator[tuple[LogSegment, FoundBatch]]:
        """Every stored batch header from the segment holding ``start_offset`` on."""
        for segment in self.segments[self._segment_slot(start_offset) :]:
            for found in segment.headers_from(segment.index.lookup(start_offset)):
                yield segment, found

    def offset_for_timestamp(self, timestamp_ms: int,
                             log_start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp_ms``."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            start = max(segment.time_index.lookup(timestamp_ms), log_start_offset)
            for found in segment.headers_from(segment.index.lookup(start)):
                header = found.header
                if (
                    header.last_offset < log_start_offset
                    or header.max_timestamp < timestamp_ms
                ):
                    continue
                hit = _first_record(segment, found, lambda ts: ts >= timestamp_ms,
                                    log_start_offset)
                if hit is not None:
                    return hit[0], hit[1]
        return None

    def max_timestamp(self, log_start_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3)."""
        segments = [segment for segment in self.segments if segment.max_timestamp >= 0]
        if not segments:
            return None
        segment = max(segments, key=lambda segment: segment.max_timestamp)
        found = segment.find(segment.offset_of_max_timestamp)
        top = segment.max_timestamp
        hit = (_first_record(segment, found, lambda ts: ts >= top, log_start_offset)
               if found else None)
        return (hit[1], hit[0]) if hit else (top, segment.offset_of_max_timestamp)

    # -- truncation, deletion ----------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and after ``offset`` (the whole batch holding it)."""
        while len(self.segments) > 1 and self.active_segment.base_offset >= offset:
            self.segments.pop().delete()
        self.active_segment.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self.segments:
            segment.delete()
        self.segments = [self.new_segment(offset)]
        self.recovery_point = offset

    def delete_oldest(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        """Kafka's rule: a prefix of segments; the active one too if it holds data, after a roll."""
        doomed = []
        for slot, segment in enumerate(self.segments):
            following = self.segments[slot + 1] if slot + 1 < len(self.segments) else None
            if (following is None and segment.size == 0) or not predicate(segment, following):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        if len(doomed) == len(self.segments):
            self.roll()
        for segment in doomed:
            self.segments.remove(segment)
            segment.delete()
        logger.info("%s: deleted %d segment(s)", self.directory.name, len(doomed))
        return len(doomed)

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments = []

    def abandon(self) -> None:
        """Close the files without writing (the log failed)."""
        for segment in self.segments:
            segment.abandon()

    def delete(self) -> None:
        for segment in self.segments:
            segment.delete()
        self.segments = []
        shutil.rmtree(self.directory, ignore_errors=True)


def _first_record(
    segment: LogSegment, found: FoundBatch, wanted: Callable[[int], bool], log_start_offset: int
) -> tuple[int, int] | None:
    header = found.header
    batch = segment.read_bytes(found.position, header.size)
    for record in decode_records(batch, header):
        offset = header.base_offset + record.offset_delta
        if header.is_log_append_time:
            timestamp = header.max_timestamp
        else:
            timestamp = header.base_timestamp + record.timestamp_delta
        if offset >= log_start_offset and wanted(timestamp):
            return offset, timestamp
    return None
