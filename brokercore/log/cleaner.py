"""Log compaction: keep the latest record per key in the closed segments.

A pass (Kafka's LogCleaner, single-threaded and synchronous here):

1. Cleanable range: the closed segments (never the active one), stopping at the
   first whose newest timestamp is within ``min.compaction.lag.ms`` or that reaches into
   an open transaction (past the first unstable offset).
2. Skip the pass unless the dirty part (past ``cleaner-offset-checkpoint``) is at
   least ``min.cleanable.dirty.ratio`` of the range.
3. Map each key to its last offset in the range, then rewrite each segment keeping
   only records that are their key's latest, dropping tombstones whose batch is older
   than ``delete.retention.ms``. Records of aborted transactions (from the transaction
   indexes) are dropped and never count as their key's latest, as in Kafka; markers stay.
   Batches keep their baseOffset, lastOffsetDelta and
   producer fields; a batch left empty is kept (header only) if it is its
   producer's last, so idempotence state survives.

Crash safety, per segment: the new contents go to ``<base>.log.cleaned`` (fsync),
which is renamed to ``<base>.log.swap`` — the commit point — and then over
``<base>.log``. Open deletes a leftover ``.cleaned`` and completes a ``.swap``.
"""

from __future__ import annotations

import os
from pathlib import Path

from brokercore.log.checkpoint import fsync_directory, read_offset, write_offset
from brokercore.log.local_log import LocalLog
from brokercore.log.producer_state import ProducerStateManager
from brokercore.log.records import Record, RecordBatchHeader, decode_records, rebuild_batch
from brokercore.log.segment import LogSegment
from brokercore.log.transactions import AbortedTxn

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def clean(log: LocalLog, log_start_offset: int, first_unstable_offset: int,
          producers: ProducerStateManager) -> int:
    """One pass over the log's closed segments, nothing at or past `first_unstable_offset`
    (an open transaction); returns bytes reclaimed. `producers` keep their last batches."""
    if not log.config.compact:
        return 0
    now = log.clock.time_ms()
    segments = _cleanable_segments(log, now, first_unstable_offset)
    if not segments:
        return 0
    checkpoint = log.directory / CLEANER_CHECKPOINT
    first_dirty = read_offset(checkpoint, log_start_offset)
    total = sum(segment.size for segment in segments)
    dirty = sum(segment.size for segment in segments if segment.next_offset > first_dirty)
    if total == 0 or dirty == 0 or dirty / total < log.config.min_cleanable_dirty_ratio:
        return 0
    aborted = log.aborted_transactions(log_start_offset, segments[-1].next_offset)
    latest = _offset_map(segments, aborted)
    producer_last_offsets = {entry.last_offset for entry in producers.producers.values()}
    tombstone_horizon = now - log.config.delete_retention_ms
    reclaimed = 0
    for slot, segment in enumerate(log.segments):
        if segment in segments:
            cleaned = _clean_segment(segment, latest, producer_last_offsets, tombstone_horizon,
                                     aborted)
            if cleaned is not None:
                reclaimed += segment.size - len(cleaned)
                log.segments[slot] = swap_in(log, segment, cleaned)
    write_offset(checkpoint, segments[-1].next_offset)
    return reclaimed


def _cleanable_segments(log: LocalLog, now: int, first_unstable: int) -> list[LogSegment]:
    cleanable = []
    for segment in log.segments[:-1]:
        if (segment.max_timestamp > now - log.config.min_compaction_lag_ms
                or segment.next_offset > first_unstable):
            break
        cleanable.append(segment)
    return cleanable


def _stored_batches(segment: LogSegment) -> list[tuple[RecordBatchHeader, bytes]]:
    return [
        (found.header, segment.read_bytes(found.position, found.header.size))
        for found in segment.headers_from(0)
    ]


def _is_aborted(header: RecordBatchHeader, aborted: list[AbortedTxn]) -> bool:
    return header.is_transactional and not header.is_control and any(
        a.producer_id == header.producer_id and a.first_offset <= header.base_offset
        <= a.last_offset for a in aborted)


def _offset_map(segments: list[LogSegment], aborted: list[AbortedTxn]) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for header, batch in _stored_batches(segment):
            if header.is_control or _is_aborted(header, aborted):
                continue
            for record in decode_records(batch, header):
                if record.key is not None:
                    latest[record.key] = header.base_offset + record.offset_delta
    return latest


def _clean_segment(
    segment: LogSegment,
    latest: dict[bytes, int],
    producer_last_offsets: set[int],
    tombstone_horizon: int,
    aborted: list[AbortedTxn],
) -> bytes | None:
    """The segment's new contents, or None if nothing would change."""
    out, changed = bytearray(), False
    for header, batch in _stored_batches(segment):
        if header.is_control:
            out += batch
            continue
        records = decode_records(batch, header)
        expired = header.max_timestamp < tombstone_horizon
        dropped = _is_aborted(header, aborted)
        kept = [record for record in records
                if not dropped and _keep(record, header, latest, expired)]
        if len(kept) == len(records):
            out += batch
            continue
        changed = True
        if kept or (header.has_producer_id and header.last_offset in producer_last_offsets):
            out += rebuild_batch(batch, header, kept)
    return bytes(out) if changed else None


def _keep(
    record: Record, header: RecordBatchHeader, latest: dict[bytes, int], expired: bool
) -> bool:
    if record.key is None:
        return True
    if latest.get(record.key) != header.base_offset + record.offset_delta:
        return False
    return not (record.is_tombstone and expired)


def swap_in(log: LocalLog, segment: LogSegment, contents: bytes) -> LogSegment:
    """Replace a closed segment's file with ``contents``, crash-safely."""
    cleaned = segment.log_path.with_name(segment.log_path.name + ".cleaned")
    swap = segment.log_path.with_name(segment.log_path.name + ".swap")
    _write_synced(cleaned, contents)
    os.replace(cleaned, swap)
    fsync_directory(log.directory)
    install_swap(segment, swap)
    replacement = LogSegment(log.directory, segment.base_offset, log.config, segment.created_ms)
    replacement.recover()
    replacement.seal()
    replacement.flush()
    return replacement


def install_swap(segment: LogSegment, swap: Path) -> None:
    segment.close()
    os.replace(swap, segment.log_path)
    segment.index.delete_file()
    segment.time_index.delete_file()


def _write_synced(path: Path, contents: bytes) -> None:
    with path.open("wb") as file:
        file.write(contents)
        file.flush()
        os.fsync(file.fileno())
