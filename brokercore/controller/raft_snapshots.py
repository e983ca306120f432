"""Snapshots of the metadata log (KIP-630): what they hold, how they are kept, and on disk.

A snapshot is the metadata image at a committed offset, written as the records that rebuild
it on an empty image. With it, the log before it is no longer needed to recover: a restart
loads the latest snapshot and replays only the entries after it, and a voter that is
behind the leader's log start fetches the snapshot instead of entries the leader has
dropped.

Retention (`plan_retention`): a storage keeps the latest two snapshots and the log from the
older of them. The log start is then always 0 or the end of a kept snapshot, whose term is
known; and a latest snapshot found damaged on recovery still leaves the previous one and
every entry after it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crc32c

from brokercore.log.checkpoint import fsync_directory

from .image import Record

log = logging.getLogger(__name__)

KEPT_SNAPSHOTS = 2
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True)
class Snapshot:
    """The image after every entry below `end_offset`; `term` is that of the entry at
    `end_offset - 1` (Kafka's snapshot id: end offset and epoch)."""

    end_offset: int
    term: int
    records: tuple[Record, ...]

    @property
    def snapshot_id(self) -> tuple[int, int]:
        return self.end_offset, self.term


@dataclass(frozen=True)
class Retention:
    """What a storage does after writing a snapshot: the snapshots it keeps (ids, oldest
    first) and its new log start; `keep_log` is False when the log must be dropped whole."""

    kept: list[tuple[int, int]]
    start_offset: int
    keep_log: bool


def plan_retention(kept: list[tuple[int, int]], start_offset: int, end_offset: int,
                   term_at_end: int | None, snapshot: Snapshot) -> Retention:
    """Retention after `snapshot` is written to a storage that holds snapshots `kept` and
    entries `start_offset`..`end_offset`; `term_at_end` is the term of its entry at
    `snapshot.end_offset - 1` (None if it holds none there).

    A log that holds the snapshot's last entry, in the same term, agrees with it (Raft's log
    matching) and is kept from the previous snapshot on. Otherwise (a snapshot from the
    leader past our log, or over a diverged tail) the log is dropped and starts after it.
    """
    holds_end = start_offset <= snapshot.end_offset <= end_offset
    if holds_end and term_at_end == snapshot.term:
        ids = [*kept, snapshot.snapshot_id][-KEPT_SNAPSHOTS:]
        new_start = ids[0][0] if len(ids) == KEPT_SNAPSHOTS else start_offset
        return Retention(ids, max(start_offset, new_start), True)
    return Retention([snapshot.snapshot_id], snapshot.end_offset, False)


class SnapshotDownload:
    """The leader's snapshot as a follower fetches it, chunk by chunk (FetchSnapshot)."""

    def __init__(self, snapshot_id: tuple[int, int], total: int) -> None:
        self.snapshot_id, self.total = snapshot_id, total
        self.records: list[Record] = []

    def add(self, position: int, records: tuple[Record, ...]) -> bool:
        """Take the chunk if it is the next one; False for a repeat or one past a gap."""
        if position != len(self.records):
            return False
        self.records.extend(records)
        return True

    def snapshot(self) -> Snapshot | None:
        """The whole snapshot, once every record has come."""
        if len(self.records) < self.total:
            return None
        return Snapshot(self.snapshot_id[0], self.snapshot_id[1], tuple(self.records))


class SnapshotPolicy:
    """When a node snapshots its image (Kafka's two settings): once the records applied
    since the last snapshot reach `max_bytes` in the log's JSON
    (`metadata.log.max.record.bytes.between.snapshots`), or `interval` seconds after the
    last one if any record was applied since (`metadata.log.max.snapshot.interval.ms`)."""

    def __init__(self, max_bytes: int, interval: float, now: Callable[[], float]) -> None:
        self.max_bytes, self.interval, self.now = max_bytes, interval, now
        self.bytes_since = 0
        self.last = now()

    def applied(self, record: Record) -> None:
        self.bytes_since += len(json.dumps(record, separators=(",", ":"))) + 1

    def due(self) -> bool:
        if self.bytes_since >= self.max_bytes:
            return True
        return self.bytes_since > 0 and self.now() - self.last >= self.interval

    def taken(self) -> None:
        self.bytes_since, self.last = 0, self.now()


class SnapshotFiles:
    """Snapshot files in a directory, named as Kafka names them.

    On-disk format: `<end offset, 20 digits>-<term, 10 digits>.checkpoint`, JSON lines:

        {"end_offset": E, "term": T, "records": N}
        ...N lines, one metadata record each ({"type": ..., "version": ..., ...})
        {"crc32c": C}

    C is the CRC-32C of every byte before the last line. A file is written as
    `<name>.part`, fsynced, renamed into place and the directory fsynced, so a crash leaves
    either no snapshot or a whole one; a `.part` file is deleted on open. A file whose
    checksum, count or header does not match (torn, or damaged on disk) is ignored.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        for part in directory.glob("*.checkpoint.part"):
            part.unlink()

    def path(self, snapshot_id: tuple[int, int]) -> Path:
        end_offset, term = snapshot_id
        return self.directory / f"{end_offset:020d}-{term:010d}.checkpoint"

    def ids(self) -> list[tuple[int, int]]:
        """The ids of the snapshot files present, oldest first (valid or not)."""
        found = []
        for path in self.directory.iterdir():
            match = _NAME.match(path.name)
            if match:
                found.append((int(match[1]), int(match[2])))
        return sorted(found)

    def write(self, snapshot: Snapshot) -> None:
        body = [json.dumps({"end_offset": snapshot.end_offset, "term": snapshot.term,
                            "records": len(snapshot.records)}).encode() + b"\n"]
        body += [json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in snapshot.records]
        data = b"".join(body)
        data += json.dumps({"crc32c": crc32c.crc32c(data)}).encode() + b"\n"
        target = self.path(snapshot.snapshot_id)
        part = target.with_name(target.name + ".part")
        with open(part, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, target)
        fsync_directory(self.directory)

    def read(self, snapshot_id: tuple[int, int]) -> Snapshot | None:
        """The snapshot, or None if its file is missing, torn or damaged."""
        path = self.path(snapshot_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        snapshot = _parse(data, snapshot_id)
        if snapshot is None:
            log.warning("ignoring torn or damaged metadata snapshot %s", path)
        return snapshot

    def latest_valid(self, at_least: int = 0) -> Snapshot | None:
        """The newest readable snapshot ending at or after `at_least`."""
        for snapshot_id in reversed(self.ids()):
            if snapshot_id[0] < at_least:
                return None
            snapshot = self.read(snapshot_id)
            if snapshot is not None:
                return snapshot
        return None

    def delete_except(self, kept: list[tuple[int, int]]) -> None:
        for snapshot_id in self.ids():
            if snapshot_id not in kept:
                self.path(snapshot_id).unlink(missing_ok=True)


def _parse(data: bytes, snapshot_id: tuple[int, int]) -> Snapshot | None:
    body, _, footer = data.rstrip(b"\n").rpartition(b"\n")
    try:
        if json.loads(footer)["crc32c"] != crc32c.crc32c(body + b"\n"):
            return None
        lines = body.split(b"\n")
        header = json.loads(lines[0])
        records = tuple(json.loads(line) for line in lines[1:])
    except (ValueError, KeyError, TypeError):
        return None
    if (header.get("end_offset"), header.get("term")) != snapshot_id:
        return None
    if header.get("records") != len(records) or not all(isinstance(r, dict) for r in records):
        return None
    return Snapshot(snapshot_id[0], snapshot_id[1], records)
