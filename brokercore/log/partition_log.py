"""The durable log of one partition: an ordered list of segments plus its checkpoints."""

from __future__ import annotations

import dataclasses
import functools
import logging
import shutil
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from brokercore.clock import Clock
from brokercore.log import cleaner, recovery
from brokercore.log.checkpoint import fsync_directory
from brokercore.log.config import LogConfig
from brokercore.log.epoch_cache import LeaderEpochCache
from brokercore.log.errors import InvalidRecordError, KafkaStorageError, OffsetOutOfRangeError
from brokercore.log.producer_state import ProducerAppend, ProducerEntry, ProducerStateManager
from brokercore.log.records import (
    RecordBatchHeader,
    decode_records,
    patch_offset_and_epoch,
    stamp_log_append_time,
)
from brokercore.log.segment import FoundBatch, LogSegment
from brokercore.log.transactions import (
    AbortedTxn,
    ControlMarker,
    build_control_batch,
    marker_of,
)
from brokercore.log.validation import validate_record_set, with_topic_codec
from brokercore.log.verification import VerificationGuard

logger = logging.getLogger(__name__)

from brokercore.log.recovery import CLEAN_SHUTDOWN  # noqa: E402

P = ParamSpec("P")
R = TypeVar("R")


def _io(
    method: Callable[Concatenate[PartitionLog, P], R],
) -> Callable[Concatenate[PartitionLog, P], R]:
    """Kafka's maybeHandleIOException: an OSError in the log's files fails the log. This
    call and every later one raise KafkaStorageError, and `on_failure` (the replica
    manager's, which takes the log's whole dir offline) hears of it once."""

    @functools.wraps(method)
    def guarded(self: PartitionLog, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.failure is not None:
            raise KafkaStorageError(f"the log of {self.directory.name} is offline: "
                                    f"{self.failure}")
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self.fail(exc)
            raise KafkaStorageError(f"I/O error in the log of {self.directory.name}: "
                                    f"{exc}") from exc

    return guarded


@dataclass(frozen=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    duplicate: bool  # an idempotent retry: original offsets, nothing written


@dataclass(frozen=True)
class FetchData:
    records: bytes | memoryview  # whole v2 batches, exactly as stored
    first_offset: int  # base offset of the first batch returned, -1 if none


class PartitionLog:
    """One partition's log directory (``<topic>-<partition>/``), Kafka's layout:

    - ``<base>.log``, ``<base>.index``, ``<base>.timeindex`` per segment (``LogSegment``);
      the highest-based segment is the active one, the only one appended to.
    - ``cleaner-offset-checkpoint``: one offset, in Kafka's checkpoint format.
    - ``leader-epoch-checkpoint`` (``LeaderEpochCache``) and, after a clean close only,
      ``producer-state.snapshot`` (``ProducerStateManager``).
    - ``.kafka_cleanshutdown``: written last by ``close()``, removed by ``open()``. If it is
      missing at open, every segment past the recovery point is rescanned and cut at
      the first torn or corrupt batch.
    - ``*.log.cleaned`` / ``*.log.swap``: compaction in progress (see ``cleaner``).

    The log start and the recovery point live in memory here; the replica manager writes
    them for every partition of a log dir into that dir's ``log-start-offset-checkpoint``
    and ``recovery-point-offset-checkpoint`` (Kafka's LogManager) and passes them to
    ``open``. ``on_truncated`` tells it when a truncation lowered them.

    Durability: an append returns after write(), so its bytes are in the page cache and
    survive a kill -9 of the process. fsync (data, then indexes, then the recovery
    point moves) happens after ``flush.messages`` messages or ``flush.ms``, on roll and on
    close; only it protects against power loss.

    Not thread-safe: owned by one event loop; every method is synchronous.
    """

    def __init__(self, directory: Path, config: LogConfig, clock: Clock) -> None:
        self.directory = directory
        self.config = config
        self.clock = clock
        self.segments: list[LogSegment] = []
        self._log_start_offset = 0
        self.recovery_point = 0  # everything below it is fsynced
        self.legacy_checkpoints = False  # its directory holds the files of earlier versions
        self.producers = ProducerStateManager(directory)
        self.epochs = LeaderEpochCache(directory)
        self._unflushed_messages = 0
        self._last_flush_ms = clock.time_ms()
        self._new_directory = False  # created without fsync; the first flush syncs its entry
        self.failure: str | None = None  # the I/O error that took this log offline
        # Called once, with the log and the error, when an I/O error fails the log; may be
        # called on whichever thread uses the log then.
        self.on_failure: Callable[[PartitionLog, OSError], None] | None = None
        # Called (on the caller's thread) when a truncation lowered the recovery point or
        # moved the log start: the log dir's checkpoints should be written soon.
        self.on_truncated: Callable[[PartitionLog], None] | None = None

    @classmethod
    def open(cls, directory: Path, config: LogConfig, clock: Clock, *,
             recovery_point: int | None = None,
             log_start_offset: int | None = None) -> PartitionLog:
        """Open (and if needed recover) the log in ``directory``, or create it empty.

        ``recovery_point`` and ``log_start_offset`` are the log dir's checkpointed values
        for it, None if its checkpoints do not list it (missing, unreadable, or written
        before the log existed): then recovery starts at 0 (after a crash) and the log
        start is the first segment's base, unless its directory holds the files of
        earlier versions.

        A new log is created without fsync: it holds nothing to lose, and the metadata
        log, which is fsynced, recreates it if a power loss takes it. Its first flush
        makes the directory entry durable along with its first data. A crash part-way
        through creating it leaves a directory that the next open recovers like any other.
        """
        try:
            directory.mkdir(parents=True)
        except FileExistsError:
            log = cls(directory, config, clock)
            recovery.load(log, recovery_point, log_start_offset)
            return log
        log = cls(directory, config, clock)
        log.segments = [log._new_segment(0)]
        log._new_directory = True
        return log

    # -- offsets ---------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @_io
    def set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        self.epochs.truncate_from_start(offset)
        self.producers.remove_before(offset)

    # -- appends ---------------------------------------------------------------

    @_io
    def append_as_leader(self, records: bytes | memoryview, leader_epoch: int,
                         verification_guard: VerificationGuard | None = None) -> AppendResult:
        """Validate a Produce record set, convert it to the topic's codec if it has one, stamp
        offsets and epoch, write it all or nothing. With a `verification_guard` (KIP-890
        verification is on), a transactional batch must continue its producer's open
        transaction here or carry the guard its verification started with."""
        buf = bytearray(records)
        buf, batches = with_topic_codec(buf, validate_record_set(buf, self.config), self.config)
        now = self.clock.time_ms()
        producer_append = self.producers.begin()
        offset, stamped = self.log_end_offset, []
        for found in batches:
            header = found.header
            if header.has_producer_id:
                original = producer_append.find_duplicate(header)
                if original is not None:
                    return AppendResult(
                        original.first_offset,
                        original.last_offset,
                        -1,
                        self._log_start_offset,
                        header.records_count,
                        duplicate=True,
                    )
                if verification_guard is not None and header.is_transactional:
                    producer_append.check_verified(header, verification_guard)
                producer_append.validate(header)
            stamped.append(self._stamp(buf, found, offset, leader_epoch, now, producer_append))
            offset = stamped[-1].header.next_offset
        return self._write_stamped(buf, stamped, leader_epoch, producer_append, now)

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int,
                                             epoch: int) -> VerificationGuard:
        return self.producers.maybe_start_verification(producer_id, sequence, epoch,
                                                       self.clock.time_ms())

    @_io
    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        leader_epoch: int,
    ) -> AppendResult:
        """Write the control batch that ends a producer's transaction (WriteTxnMarkers)."""
        now = self.clock.time_ms()
        buf = bytearray(build_control_batch(producer_id, producer_epoch, commit,
                                            coordinator_epoch, now))
        [found] = validate_record_set(buf, self.config, from_leader=True)
        producer_append = self.producers.begin()
        producer_append.validate_marker(found.header, coordinator_epoch)
        stamped = self._stamp(buf, found, self.log_end_offset, leader_epoch, now,
                              producer_append, ControlMarker(commit, coordinator_epoch))
        return self._write_stamped(buf, [stamped], leader_epoch, producer_append, now)

    def _write_stamped(
        self, buf: bytearray, stamped: list[FoundBatch], leader_epoch: int,
        producer_append: ProducerAppend, now: int,
    ) -> AppendResult:
        first = stamped[0].header.base_offset
        self._write(buf, stamped, now)
        self._complete(producer_append)
        self.epochs.assign(leader_epoch, first)
        return AppendResult(
            first,
            stamped[-1].header.last_offset,
            now if self.config.log_append_time else -1,
            self._log_start_offset,
            sum(found.header.records_count for found in stamped),
            False,
        )

    def _stamp(
        self,
        buf: bytearray,
        found: FoundBatch,
        offset: int,
        epoch: int,
        now: int,
        producer_append: ProducerAppend,
        marker: ControlMarker | None = None,
    ) -> FoundBatch:
        patch_offset_and_epoch(buf, found.position, offset, epoch)
        header = dataclasses.replace(found.header, base_offset=offset, partition_leader_epoch=epoch)
        if self.config.log_append_time and not header.is_control:
            stamp_log_append_time(buf, found.position, header, now)
            header = RecordBatchHeader.unpack(buf, found.position)
        if header.has_producer_id:
            producer_append.record(header, marker)
        return FoundBatch(found.position, header)

    @_io
    def append_as_follower(self, records: bytes | memoryview) -> AppendResult:
        """Replication: keep the leader's offsets and epochs; offsets must not go back."""
        buf = bytes(records)
        batches = validate_record_set(buf, self.config, from_leader=True)
        expected = self.log_end_offset
        for found in batches:
            if found.header.base_offset < expected:
                raise InvalidRecordError(
                    f"follower append at {found.header.base_offset} below expected {expected}"
                )
            expected = found.header.next_offset
        now = self.clock.time_ms()
        self._write(buf, batches, now)
        producer_append = self.producers.begin()
        for found in batches:
            header = found.header
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
            if header.has_producer_id:
                marker = marker_of(buf[found.position : found.position + header.size], header)
                producer_append.record(header, marker)
        self._complete(producer_append)
        first, last = batches[0].header, batches[-1].header
        return AppendResult(
            first.base_offset,
            last.last_offset,
            -1,
            self._log_start_offset,
            sum(found.header.records_count for found in batches),
            False,
        )

    def _complete(self, producer_append: ProducerAppend) -> None:
        """Commit an append's producer changes; index the transactions it aborted."""
        producer_append.commit()
        for done in producer_append.completed:
            self.active_segment.txn_index.add_if_aborted(
                done, producer_append.first_unstable_offset())

    def _write(self, buf: bytes | bytearray, batches: list[FoundBatch], now: int) -> None:
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
        self.segments.append(self._new_segment(base_offset))

    # -- reads -----------------------------------------------------------------

    @_io
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchData:
        """Whole batches from the one containing ``fetch_offset``, never one starting at or
        beyond ``max_offset``; at least one batch if ``min_one_batch``."""
        end = self.log_end_offset
        if fetch_offset < self._log_start_offset or fetch_offset > end:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} outside [{self._log_start_offset}, {end}]"
            )
        limit = end if max_offset is None else min(max_offset, end)
        if fetch_offset >= limit:  # a caught-up reader: the common idle fetch
            return FetchData(b"", -1)
        for segment in self.segments[self._segment_slot(fetch_offset) :]:
            found = segment.find(fetch_offset)
            if found is None:
                continue
            if found.header.base_offset >= limit:
                break
            data = segment.read_from(found, max_bytes, limit, min_one_batch)
            return FetchData(data, found.header.base_offset if data else -1)
        return FetchData(b"", -1)

    def first_unstable_offset(self) -> int:
        """Where the oldest open transaction starts, or the log end: the last stable offset
        is the smaller of this and the high watermark."""
        first = self.producers.first_unstable_offset()
        # An open transaction whose start was deleted (DeleteRecords) holds nothing below
        # the log start, as in Kafka.
        return self.log_end_offset if first is None else max(first, self._log_start_offset)

    @_io
    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start, end), for read_committed fetches. Each
        is indexed by the segment holding its marker, which is at or after ``start``."""
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

    @_io
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp_ms``."""
        for segment in self.segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            start = max(segment.time_index.lookup(timestamp_ms), self._log_start_offset)
            for found in segment.headers_from(segment.index.lookup(start)):
                header = found.header
                if (
                    header.last_offset < self._log_start_offset
                    or header.max_timestamp < timestamp_ms
                ):
                    continue
                hit = self._first_record(segment, found, lambda ts: ts >= timestamp_ms)
                if hit is not None:
                    return hit[0], hit[1]
        return None

    @_io
    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3)."""
        segments = [segment for segment in self.segments if segment.max_timestamp >= 0]
        if not segments:
            return None
        segment = max(segments, key=lambda segment: segment.max_timestamp)
        found = segment.find(segment.offset_of_max_timestamp)
        top = segment.max_timestamp
        hit = self._first_record(segment, found, lambda ts: ts >= top) if found else None
        return (hit[1], hit[0]) if hit else (top, segment.offset_of_max_timestamp)

    def _first_record(
        self, segment: LogSegment, found: FoundBatch, wanted: Callable[[int], bool]
    ) -> tuple[int, int] | None:
        header = found.header
        batch = segment.read_bytes(found.position, header.size)
        for record in decode_records(batch, header):
            offset = header.base_offset + record.offset_delta
            if header.is_log_append_time:
                timestamp = header.max_timestamp
            else:
                timestamp = header.base_timestamp + record.timestamp_delta
            if offset >= self._log_start_offset and wanted(timestamp):
                return offset, timestamp
        return None

    # -- log start, truncation, retention ---------------------------------------

    @_io
    def delete_records_before(self, offset: int) -> int:
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete before {offset}: log end is {self.log_end_offset}"
            )
        if offset > self._log_start_offset:
            self.set_log_start_offset(offset)
        return self._log_start_offset

    @_io
    def truncate_to(self, offset: int) -> None:
        """Replication: drop everything at and after ``offset`` (the whole batch holding it)."""
        if offset >= self.log_end_offset:
            return
        if offset < self._log_start_offset:
            self._truncate_fully_and_start_at(offset)
        else:
            while len(self.segments) > 1 and self.active_segment.base_offset >= offset:
                self.segments.pop().delete()
            self.active_segment.truncate_to(offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.rebuild_producer_state()
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._truncated()

    @_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Replication: a follower behind the leader's log start drops its whole log and
        continues at ``offset``, the leader's log start."""
        self._truncate_fully_and_start_at(offset)
        self.epochs.clear()
        self.rebuild_producer_state()
        self._truncated()

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self.segments:
            segment.delete()
        self.segments = [self._new_segment(offset)]
        self._log_start_offset = self.recovery_point = offset

    def _truncated(self) -> None:
        # Kafka writes the dir's checkpoints right after a truncation: a recovery point
        # left above the new log end would let unflushed records written there later pass
        # for fsynced ones after a power loss.
        if self.on_truncated is not None:
            self.on_truncated(self)

    @_io
    def enforce_retention(self) -> int:
        """Delete old segments by log start, then retention.ms and retention.bytes."""
        deleted = self._delete_oldest(
            lambda segment, following: (
                following is not None and following.base_offset <= self._log_start_offset
            )
        )
        if self.config.delete and self.config.retention_ms >= 0:
            now = self.clock.time_ms()
            deleted += self._delete_oldest(
                lambda segment, _: now - _largest_timestamp(segment) > self.config.retention_ms
            )
        if self.config.delete and self.config.retention_bytes >= 0:
            excess = [self.size_in_bytes - self.config.retention_bytes]

            def over_size(segment: LogSegment, _: LogSegment | None) -> bool:
                if excess[0] - segment.size < 0:
                    return False
                excess[0] -= segment.size
                return True

            deleted += self._delete_oldest(over_size)
        return deleted

    def _delete_oldest(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
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
        self.set_log_start_offset(max(self._log_start_offset, self.segments[0].base_offset))
        return len(doomed)

    @_io
    def clean(self) -> int:
        """One compaction pass over the closed segments; returns bytes reclaimed."""
        return cleaner.clean(self)

    # -- epochs, producers -----------------------------------------------------

    @_io
    def assign_epoch(self, epoch: int, start_offset: int, *, persist: bool = True) -> None:
        """Record in the epoch cache that `epoch` starts at `start_offset` (a leadership);
        without `persist`, the caller writes it later (`LeaderEpochCache.persist`)."""
        self.epochs.assign(epoch, start_offset, persist=persist)

    @_io
    def truncate_epochs_from_end(self, end_offset: int) -> None:
        self.epochs.truncate_from_end(end_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(leader_epoch, self.log_end_offset)

    def latest_epoch(self) -> int | None:
        return self.epochs.latest_epoch()

    def rebuild_producer_state(self) -> None:
        """Producer state and every transaction index, from the log (recovery, truncation)."""
        recovery.rebuild_producer_state(self)

    def remove_expired_producers(self) -> int:
        """Kafka's periodic producer expiration (`producer.id.expiration.check.interval.ms`):
        forget producers idle for `producer.id.expiration.ms`, unless a transaction of theirs
        is open, and verifications started that long ago. How many producers went."""
        return self.producers.remove_expired(self.clock.time_ms(),
                                             self.config.producer_id_expiration_ms)

    def producer_state(self) -> dict[int, ProducerEntry]:
        """Idempotent producers of this partition, by producer id (DescribeProducers)."""
        return dict(self.producers.producers)

    # -- lifecycle ---------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.config = config

    @_io
    def roll(self, base_offset: int | None = None) -> None:
        """Close the active segment (if it holds data) and start one at the log end."""
        active = self.active_segment
        if active.size == 0:
            return
        active.seal()
        self.flush()
        self.segments.append(
            self._new_segment(self.log_end_offset if base_offset is None else base_offset)
        )

    def _new_segment(self, base_offset: int) -> LogSegment:
        segment = LogSegment(self.directory, base_offset, self.config, self.clock.time_ms())
        segment.seal()
        return segment

    @_io
    def flush_if_due(self) -> bool:
        """fsync if writes are pending and flush.ms has passed since the last flush.

        The broker's periodic flusher calls this, so a partition that stops receiving
        appends is still flushed on time.
        """
        due = self.clock.time_ms() - self._last_flush_ms >= self.config.flush_ms
        if self._unflushed_messages and due:
            self.flush()
            return True
        return False

    @_io
    def flush(self) -> None:
        """fsync every segment with unflushed writes, then move the recovery point."""
        for segment in self.segments:
            if segment.dirty:
                segment.flush()
        if self.epochs.dirty:  # recovery re-learns epochs only past the recovery point
            self.epochs.persist()
        self.recovery_point = self.log_end_offset
        if self._new_directory:
            fsync_directory(self.directory.parent)
            self._new_directory = False
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.time_ms()

    @_io
    def close(self) -> None:
        if not self.segments:
            return
        for segment in self.segments:
            segment.seal()
            segment.dirty = True
        self.flush()
        self.producers.write_snapshot(self.log_end_offset)
        (self.directory / CLEAN_SHUTDOWN).write_bytes(b"")
        fsync_directory(self.directory)
        for segment in self.segments:
            segment.close()
        self.segments = []

    @_io
    def drop_legacy_checkpoints(self) -> None:
        """After the log dir's checkpoints listing this log were written: the files of
        earlier versions in its directory are not needed any more."""
        recovery.drop_legacy_checkpoints(self.directory)
        self.legacy_checkpoints = False

    def fail(self, error: OSError) -> None:
        """Take the log offline after an I/O error here or elsewhere in its dir: close its
        files without writing, refuse every later call (KafkaStorageError)."""
        if self.failure is not None:
            return
        self.failure = str(error)
        for segment in self.segments:
            segment.abandon()
        if self.on_failure is not None:
            self.on_failure(self, error)

    def delete(self) -> None:
        for segment in self.segments:
            segment.delete()
        self.segments = []
        shutil.rmtree(self.directory, ignore_errors=True)


def _largest_timestamp(segment: LogSegment) -> int:
    return segment.max_timestamp if segment.max_timestamp >= 0 else segment.last_modified_ms()
