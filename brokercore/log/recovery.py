"""Opening a partition directory: finish interrupted swaps, load or rescan segments.

After a clean shutdown (``.kafka_cleanshutdown`` present) segments are trusted and
only indexes that are missing or fail their sanity check are rebuilt. Otherwise every
segment that may hold data past the recovery point is rescanned batch by batch with
CRC checks, its indexes rebuilt and its file cut at the first bad batch; segments
after a cut are deleted, as Kafka does.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from brokercore.log.checkpoint import fsync_directory, read_offset
from brokercore.log.errors import CorruptLogError
from brokercore.log.local_log import LocalLog
from brokercore.log.producer_state import ProducerStateManager
from brokercore.log.segment import LogSegment
from brokercore.log.transactions import marker_of

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
# Where earlier versions kept a partition's log start and recovery point: in its own
# directory. Each log dir's root now holds one file of each for all its partitions (the
# replica manager's); these are read only for a log those files do not list yet.
LEGACY_LOG_START = "log-start-offset-checkpoint"
LEGACY_RECOVERY_POINT = "recovery-point-offset-checkpoint"


@dataclass(frozen=True)
class Loaded:
    log_start_offset: int
    clean_shutdown: bool  # if not, every segment is to be fsynced before the log is used
    legacy_checkpoints: bool  # its directory holds the files of earlier versions


def load(log: LocalLog, producers: ProducerStateManager, recovery_point: int | None,
         log_start: int | None) -> Loaded:
    """Open the log's files, and rebuild its producers and epochs. `recovery_point` and
    `log_start` are its entries in the log dir's checkpoints; None where it has none (then
    the files of earlier versions in its directory are read; failing those, 0 and the first
    segment's base, as Kafka does). After a crash every segment is left dirty: the caller
    flushes them, which moves the recovery point to the log end."""
    directory = log.directory
    finish_swaps(directory)
    marker = directory / CLEAN_SHUTDOWN
    clean_shutdown = marker.exists()
    if clean_shutdown:
        marker.unlink()
        fsync_directory(directory)
    legacy = any((directory / name).exists()
                 for name in (LEGACY_LOG_START, LEGACY_RECOVERY_POINT))
    if log_start is None:
        log_start = _legacy_offset(directory, LEGACY_LOG_START)
    if recovery_point is None:
        recovery_point = _legacy_offset(directory, LEGACY_RECOVERY_POINT)
    log.segments = _load_segments(log, recovery_point, clean_shutdown)
    if not log.segments:
        log.segments = [LogSegment(directory, log_start, log.config, log.clock.time_ms())]
        log.segments[0].seal()
    end = log.log_end_offset
    log_start = min(max(log_start, log.segments[0].base_offset), end)
    log.epochs.truncate_from_start(log_start)  # as a move of the log start does
    producers.remove_before(log_start)
    now, expiration = log.clock.time_ms(), log.config.producer_id_expiration_ms
    if not (clean_shutdown and producers.load_snapshot(end, now, expiration)):
        rebuild_producer_state(log, producers, log_start)  # and the transaction indexes
    producers.delete_snapshot()
    log.epochs.truncate_from_end(end)
    if not clean_shutdown:
        # A leadership's epoch may have been written after its first batches (deferred to
        # a disk thread); the batches past the recovery point carry it.
        for _, found in log.batches(min(recovery_point, end)):
            log.epochs.assign(found.header.partition_leader_epoch, found.header.base_offset)
        for segment in log.segments:
            segment.dirty = True
    return Loaded(log_start, clean_shutdown, legacy)


def _legacy_offset(directory: Path, name: str) -> int:
    """A checkpoint of earlier versions in the partition's directory, 0 if it has none or it
    is unreadable (as Kafka treats a corrupt checkpoint: recover from the start)."""
    path = directory / name
    try:
        return read_offset(path, 0)
    except CorruptLogError as exc:
        logger.warning("%s: ignoring %s", directory.name, exc)
        return 0


def drop_legacy_checkpoints(directory: Path) -> None:
    """Once the log dir's checkpoints list the partition, its old files are not needed."""
    for name in (LEGACY_LOG_START, LEGACY_RECOVERY_POINT):
        (directory / name).unlink(missing_ok=True)


def _load_segments(
    log: LocalLog, recovery_point: int, clean_shutdown: bool
) -> list[LogSegment]:
    directory = log.directory
    bases = segment_bases(directory)
    _remove_orphan_indexes(directory, set(bases))
    segments: list[LogSegment] = []
    for slot, base in enumerate(bases):
        segment = LogSegment(directory, base, log.config, log.clock.time_ms())
        following = bases[slot + 1] if slot + 1 < len(bases) else None
        must_scan = not clean_shutdown and (following is None or following > recovery_point)
        segments.append(segment)
        if not must_scan and segment.load():
            continue
        cut = segment.recover()
        if cut and following is not None:
            logger.warning(
                "%s: cut %d bad bytes at %s; dropping later segments", directory.name, cut, base
            )
            for later in bases[slot + 1 :]:
                LogSegment(directory, later, log.config, 0).delete()
            break
        if cut:
            logger.warning(
                "%s: cut %d bytes of torn or corrupt tail at segment %s", directory.name, cut, base
            )
    return segments


def segment_bases(directory: Path) -> list[int]:
    return sorted(int(path.stem) for path in directory.glob("*.log") if _is_segment_stem(path.stem))


def _is_segment_stem(stem: str) -> bool:
    return len(stem) == 20 and stem.isdigit()


def _remove_orphan_indexes(directory: Path, bases: set[int]) -> None:
    for pattern in ("*.index", "*.timeindex", "*.txnindex"):
        for path in directory.glob(pattern):
            if _is_segment_stem(path.stem) and int(path.stem) not in bases:
                path.unlink()


def finish_swaps(directory: Path) -> None:
    """A ``.swap`` is a finished cleaned segment: install it. A ``.cleaned`` is not: drop it.

    The directory is fsynced only when this changed it: a log with nothing left over from
    an interrupted compaction opens without one."""
    leftovers = [*directory.glob("*.log.cleaned"), *directory.glob("*.tmp")]
    for path in leftovers:
        path.unlink()
    swaps = list(directory.glob("*.log.swap"))
    for path in swaps:
        target = path.with_name(path.name.removesuffix(".swap"))
        os.replace(path, target)
        target.with_suffix(".index").unlink(missing_ok=True)
        target.with_suffix(".timeindex").unlink(missing_ok=True)
        logger.info("%s: completed interrupted swap of %s", directory.name, target.name)
    if leftovers or swaps:
        fsync_directory(directory)


def rebuild_producer_state(log: LocalLog, producers: ProducerStateManager,
                           log_start_offset: int) -> None:
    """Producer state and every transaction index, from the batch headers of the log (and
    each marker's record). Each abort is indexed by the segment holding its marker."""
    for segment in log.segments:
        segment.txn_index.reset()
    producers.reset()
    producer_append = producers.begin()
    for segment, found in log.batches():
        header = found.header
        if not header.has_producer_id:
            continue
        marker = None
        if header.is_control:
            marker = marker_of(segment.read_bytes(found.position, header.size), header)
        producer_append.record(header, marker)
        for done in producer_append.completed:
            segment.txn_index.add_if_aborted(done, producer_append.first_unstable_offset())
        producer_append.completed.clear()
    producer_append.commit()
    producers.remove_before(log_start_offset)
    # Kafka leaves out the producers of the snapshot it reloads that have expired; without
    # per-segment snapshots the whole log is replayed, so the rule applies to all of it.
    producers.remove_expired(log.clock.time_ms(), log.config.producer_id_expiration_ms)
