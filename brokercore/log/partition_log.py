"""The durable log of one partition: an ordered list of segments plus its checkpoints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brokercore.clock import Clock
from brokercore.log import cleaner, recovery
from brokercore.log.checkpoint import fsync_directory
from brokercore.log.config import LogConfig
from brokercore.log.epoch_cache import LeaderEpochCache
from brokercore.log.errors import OffsetOutOfRangeError, guard_io
from brokercore.log.local_log import FetchData, LocalLog
from brokercore.log.producer_state import ProducerAppend, ProducerEntry, ProducerStateManager
from brokercore.log.records import Writable, stamp_batch
from brokercore.log.segment import FoundBatch, LogSegment
from brokercore.log.transactions import (
    AbortedTxn,
    ControlMarker,
    build_control_batch,
    marker_of,
)
from brokercore.log.validation import (
    check_follower_offsets,
    validate_record_set,
    with_topic_codec,
)
from brokercore.log.verification import VerificationGuard


@dataclass(frozen=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    duplicate: bool  # an idempotent retry: original offsets, nothing written


class PartitionLog:
    """One partition's log directory (``<topic>-<partition>/``), Kafka's layout:

    - ``<base>.log``, ``<base>.index``, ``<base>.timeindex`` per segment (``LogSegment``);
      the highest-based segment is the active one, the only one appended to. Its
      ``LocalLog`` writes, rolls, flushes and reads them; this class decides what is
      written (validation, producers, transactions) and where the log starts.
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
        self.clock = clock
        self._log_start_offset = 0
        self.legacy_checkpoints = False  # its directory holds the files of earlier versions
        self.producers = ProducerStateManager(directory)
        self.epochs = LeaderEpochCache(directory)
        self.local = LocalLog(directory, config, clock, self.epochs)
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
            loaded = recovery.load(log.local, log.producers, recovery_point, log_start_offset)
            log._log_start_offset = loaded.log_start_offset
            log.legacy_checkpoints = loaded.legacy_checkpoints
            if not loaded.clean_shutdown:
                log.flush()  # and the recovery point is the log end
            log.local.recovery_point = log.log_end_offset
            return log
        log = cls(directory, config, clock)
        log.local.segments = [log.local.new_segment(0)]
        log.local.new_directory = True
        return log

    # -- offsets ---------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def recovery_point(self) -> int:
        """Everything below it is fsynced."""
        return self.local.recovery_point

    @property
    def size_in_bytes(self) -> int:
        return self.local.size_in_bytes

    @property
    def segments(self) -> list[LogSegment]:
        return self.local.segments

    @property
    def active_segment(self) -> LogSegment:
        return self.local.active_segment

    @property
    def config(self) -> LogConfig:
        return self.local.config

    @guard_io
    def set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        self.epochs.truncate_from_start(offset)
        self.producers.remove_before(offset)

    # -- appends ---------------------------------------------------------------

    @guard_io
    def append_as_leader(self, records: bytes | memoryview, leader_epoch: int,
                         verification_guard: VerificationGuard | None = None) -> AppendResult:
        """Validate a Produce record set, convert it to the topic's codec if it has one, stamp
        offsets and epoch, write it all or nothing. With a `verification_guard` (KIP-890
        verification is on), a transactional batch must continue its producer's open
        transaction here or carry the guard its verification started with.

        A writable view (a Produce request's records: a slice of the request's own frame,
        which nothing reads once it is answered) is stamped in place; anything else is
        copied first."""
        buf = _stampable(records)
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

    @guard_io
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
        self, buf: Writable, stamped: list[FoundBatch], leader_epoch: int,
        producer_append: ProducerAppend, now: int,
    ) -> AppendResult:
        first = stamped[0].header.base_offset
        self.local.write(buf, stamped, now)
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
        buf: Writable,
        found: FoundBatch,
        offset: int,
        epoch: int,
        now: int,
        producer_append: ProducerAppend,
        marker: ControlMarker | None = None,
    ) -> FoundBatch:
        append_time = now if self.config.log_append_time else None
        header = stamp_batch(buf, found.position, found.header, offset, epoch, append_time)
        if header.has_producer_id:
            producer_append.record(header, marker)
        return FoundBatch(found.position, header)

    @guard_io
    def append_as_follower(self, records: bytes | memoryview) -> AppendResult:
        """Replication: keep the leader's offsets and epochs; offsets must not go back."""
        buf = bytes(records)
        batches = validate_record_set(buf, self.config, from_leader=True)
        check_follower_offsets(batches, self.log_end_offset)
        now = self.clock.time_ms()
        self.local.write(buf, batches, now)
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

    # -- reads -----------------------------------------------------------------

    @guard_io
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
        return self.local.read(fetch_offset, max_bytes, limit, min_one_batch)

    def first_unstable_offset(self) -> int:
        """Where the oldest open transaction starts, or the log end: the last stable offset
        is the smaller of this and the high watermark."""
        first = self.producers.first_unstable_offset()
        # An open transaction whose start was deleted (DeleteRecords) holds nothing below
        # the log start, as in Kafka.
        return self.log_end_offset if first is None else max(first, self._log_start_offset)

    @guard_io
    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [start, end), for read_committed fetches."""
        return self.local.aborted_transactions(start, end)

    @guard_io
    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp_ms``."""
        return self.local.offset_for_timestamp(timestamp_ms, self._log_start_offset)

    @guard_io
    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3)."""
        return self.local.max_timestamp(self._log_start_offset)

    # -- log start, truncation, retention ---------------------------------------

    @guard_io
    def delete_records_before(self, offset: int) -> int:
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete before {offset}: log end is {self.log_end_offset}"
            )
        if offset > self._log_start_offset:
            self.set_log_start_offset(offset)
        return self._log_start_offset

    @guard_io
    def truncate_to(self, offset: int) -> None:
        """Replication: drop everything at and after ``offset`` (the whole batch holding it)."""
        if offset >= self.log_end_offset:
            return
        if offset < self._log_start_offset:
            self._truncate_fully_and_start_at(offset)
        else:
            self.local.truncate_to(offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.rebuild_producer_state()
        self.local.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._truncated()

    @guard_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Replication: a follower behind the leader's log start drops its whole log and
        continues at ``offset``, the leader's log start."""
        self._truncate_fully_and_start_at(offset)
        self.epochs.clear()
        self.rebuild_producer_state()
        self._truncated()

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self.local.truncate_fully_and_start_at(offset)
        self._log_start_offset = offset

    def _truncated(self) -> None:
        # Kafka writes the dir's checkpoints right after a truncation: a recovery point
        # left above the new log end would let unflushed records written there later pass
        # for fsynced ones after a power loss.
        if self.on_truncated is not None:
            self.on_truncated(self)

    @guard_io
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
        deleted = self.local.delete_oldest(predicate)
        if deleted:
            self.set_log_start_offset(max(self._log_start_offset, self.segments[0].base_offset))
        return deleted

    @guard_io
    def clean(self) -> int:
        """One compaction pass over the closed segments; returns bytes reclaimed."""
        return cleaner.clean(self.local, self._log_start_offset, self.first_unstable_offset(),
                             self.producers)

    # -- epochs, producers -----------------------------------------------------

    @guard_io
    def assign_epoch(self, epoch: int, start_offset: int, *, persist: bool = True) -> None:
        """Record in the epoch cache that `epoch` starts at `start_offset` (a leadership);
        without `persist`, the caller writes it later (`LeaderEpochCache.persist`)."""
        self.epochs.assign(epoch, start_offset, persist=persist)

    @guard_io
    def truncate_epochs_from_end(self, end_offset: int) -> None:
        self.epochs.truncate_from_end(end_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(leader_epoch, self.log_end_offset)

    def latest_epoch(self) -> int | None:
        return self.epochs.latest_epoch()

    def rebuild_producer_state(self) -> None:
        """Producer state and every transaction index, from the log (recovery, truncation)."""
        recovery.rebuild_producer_state(self.local, self.producers, self._log_start_offset)

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
        self.local.update_config(config)

    @guard_io
    def roll(self, base_offset: int | None = None) -> None:
        """Close the active segment (if it holds data) and start one at the log end."""
        self.local.roll(base_offset)

    @guard_io
    def flush_if_due(self) -> bool:
        """fsync if writes are pending and flush.ms has passed since the last flush.

        The broker's periodic flusher calls this, so a partition that stops receiving
        appends is still flushed on time.
        """
        return self.local.flush_if_due()

    @guard_io
    def flush(self) -> None:
        """fsync every segment with unflushed writes, then move the recovery point."""
        self.local.flush()

    @guard_io
    def close(self) -> None:
        if not self.segments:
            return
        for segment in self.segments:
            segment.seal()
            segment.dirty = True
        self.flush()
        self.producers.write_snapshot(self.log_end_offset)
        (self.directory / recovery.CLEAN_SHUTDOWN).write_bytes(b"")
        fsync_directory(self.directory)
        self.local.close()

    @guard_io
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
        self.local.abandon()
        if self.on_failure is not None:
            self.on_failure(self, error)

    def delete(self) -> None:
        self.local.delete()


def _stampable(records: bytes | memoryview) -> Writable:
    """A Produce request's records as the leader stamps them: a writable view in place,
    anything else copied."""
    if isinstance(records, memoryview) and not records.readonly:
        return records
    return bytearray(records)


def _largest_timestamp(segment: LogSegment) -> int:
    return segment.max_timestamp if segment.max_timestamp >= 0 else segment.last_modified_ms()
