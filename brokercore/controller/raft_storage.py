"""What a quorum member must not forget: its term, its vote, its snapshots and its log.

Raft is only safe if the term and vote are durable before a vote is granted, and log
entries are durable before they are acknowledged; both storages here keep that promise
(`FileRaftStorage` by fsync, `MemoryRaftStorage` by outliving the node in tests).

Offsets are absolute: `entries[0]` is at `start_offset`, which moves forward as snapshots
are taken (`raft_snapshots.plan_retention`); `start_term` is the term of the entry just
before it (the end of a kept snapshot), 0 at the log's beginning.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Concatenate, ParamSpec, Protocol, TypeVar

from brokercore.log.checkpoint import fsync_directory

from .image import Record
from .raft_snapshots import Snapshot, SnapshotFiles, plan_retention

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """One log entry: a metadata record and the term of the leader that wrote it.

    Control entries (`control=True`) belong to the quorum itself, such as the marker every
    new leader writes to commit its predecessors' entries, and are never applied.
    """

    term: int
    record: Record
    control: bool = False


class RaftStorageError(Exception):
    """Storage this node cannot start from; the message says what to do."""


P = ParamSpec("P")
R = TypeVar("R")


def _io(method: Callable[Concatenate[FileRaftStorage, P], R],
        ) -> Callable[Concatenate[FileRaftStorage, P], R]:
    """An OSError in a write fails the storage: `on_failure` hears of it once (the broker
    shuts down, as Kafka's does when the metadata log dir fails), and every later write is
    refused, so nothing half-written is built on."""

    @functools.wraps(method)
    def guarded(self: FileRaftStorage, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.failure is not None:
            raise OSError(f"the metadata log in {self.directory} has failed: {self.failure}")
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self.failure = str(exc)
            log.critical("the metadata log in %s has failed: %s", self.directory, exc)
            if self.on_failure is not None:
                self.on_failure(exc)
            raise

    return guarded


class RaftStorage(Protocol):
    term: int
    voted_for: int | None
    entries: list[Entry]
    start_offset: int
    start_term: int
    snapshot: Snapshot | None  # the latest

    def save_vote(self, term: int, voted_for: int | None) -> None: ...

    def append(self, entries: list[Entry]) -> None: ...

    def truncate(self, end_offset: int) -> None:
        """Drop every entry at `end_offset` and after."""
        ...

    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Keep `snapshot` (of committed entries) as the latest and drop what retention
        no longer needs: older snapshots, the log before the previous one, or the whole
        log if it does not hold the snapshot's last entry."""
        ...

    def close(self) -> None: ...


class MemoryRaftStorage:
    """Storage that survives a simulated crash by outliving the node object (tests)."""

    def __init__(self) -> None:
        self.term = 0
        self.voted_for: int | None = None
        self.entries: list[Entry] = []
        self.start_offset = self.start_term = 0
        self.snapshot: Snapshot | None = None
        self._kept: list[tuple[int, int]] = []

    def save_vote(self, term: int, voted_for: int | None) -> None:
        self.term, self.voted_for = term, voted_for

    def append(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)

    def truncate(self, end_offset: int) -> None:
        del self.entries[max(end_offset - self.start_offset, 0):]

    def save_snapshot(self, snapshot: Snapshot) -> None:
        plan = plan_retention(self._kept, self.start_offset, log_end_offset(self),
                              term_at(self, snapshot.end_offset - 1), snapshot)
        if not plan.keep_log:
            self.entries = []
        else:
            del self.entries[:plan.start_offset - self.start_offset]
        self.start_term = _start_term(self, plan.start_offset, plan.kept)
        self.start_offset, self._kept, self.snapshot = plan.start_offset, plan.kept, snapshot

    def close(self) -> None:
        pass


def log_end_offset(storage: RaftStorage) -> int:
    return storage.start_offset + len(storage.entries)


def term_at(storage: RaftStorage, offset: int) -> int | None:
    """The term of the entry at `offset`, if the storage holds it (or it is just before
    the log start)."""
    if offset == storage.start_offset - 1:
        return storage.start_term
    if storage.start_offset <= offset < log_end_offset(storage):
        return storage.entries[offset - storage.start_offset].term
    return None


def _start_term(storage: RaftStorage, start_offset: int, kept: list[tuple[int, int]]) -> int:
    for end, term in kept:
        if end == start_offset:
            return term
    return storage.start_term if start_offset == storage.start_offset else 0


class FileRaftStorage:
    """Term, vote, snapshots and log in `directory`, fsynced before any call returns.

    On-disk format:
    - `quorum-state.json`: `{"term": T, "voted_for": N or null}`, replaced atomically
      (write a temporary file, fsync, rename, fsync the directory).
    - `raft.jsonl`: one entry per line,
      `{"offset": N, "term": T, "control": bool, "record": {...}}\\n`, offsets dense from
      the first line's (the log start). A tail torn by a crash (no newline, not JSON, or an
      offset out of sequence) is cut off on open; that is safe because an entry is
      acknowledged only once fsynced. Dropping the log's head after a snapshot rewrites the
      file beside it (`raft.jsonl.tmp`, fsync, rename).
    - `<end offset>-<term>.checkpoint`: snapshots (`raft_snapshots.SnapshotFiles`).

    On open the latest readable snapshot that covers the log start is loaded. A log that
    disagrees with it (it ends before it, or holds another term at its last offset) is
    dropped, and a log start that no readable snapshot ends at moves up to the latest one.
    A log that no readable snapshot covers (both kept ones damaged) is refused with
    `RaftStorageError`: starting empty would lose the metadata. Removing the directory lets
    a voter of a larger quorum catch up from the leader's snapshot.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.state_path = directory / "quorum-state.json"
        self.log_path = directory / "raft.jsonl"
        self.term, self.voted_for = self._load_state()
        self.snapshots = SnapshotFiles(directory)
        self.entries: list[Entry] = []
        self.start_offset = self.start_term = 0
        self.snapshot: Snapshot | None = None
        self._kept: list[tuple[int, int]] = []
        self._positions: list[int] = []  # byte position of each entry's line
        self._file: BinaryIO | None = None
        self.failure: str | None = None  # the I/O error that failed it
        self.on_failure: Callable[[OSError], None] | None = None
        self._recover_log()
        self._recover_snapshots()
        self._file = open(self.log_path, "ab")  # noqa: SIM115  (held open for the node's life)

    def _load_state(self) -> tuple[int, int | None]:
        if not self.state_path.exists():
            return 0, None
        state = json.loads(self.state_path.read_bytes())
        return int(state["term"]), state["voted_for"]

    def _recover_log(self) -> None:
        if not self.log_path.exists():
            return
        good_bytes = 0
        with open(self.log_path, "rb") as f:
            for line in f:
                expected = self.start_offset + len(self.entries) if self.entries else None
                parsed = _parse_line(line, expected)
                if parsed is None:
                    break
                offset, entry = parsed
                if not self.entries:
                    self.start_offset = offset
                self._positions.append(good_bytes)
                self.entries.append(entry)
                good_bytes += len(line)
        if good_bytes < self.log_path.stat().st_size:
            log.warning("truncating torn raft log tail at byte %d of %s", good_bytes,
                        self.log_path)
            os.truncate(self.log_path, good_bytes)

    def _recover_snapshots(self) -> None:
        start = self.start_offset if self.entries else 0
        latest = self.snapshots.latest_valid(at_least=start)
        if latest is None:
            if start > 0:  # starting empty would lose the metadata, or worse, the data
                raise RaftStorageError(
                    f"no readable snapshot covers the metadata log from offset {start} in "
                    f"{self.directory}; to rebuild this voter from the quorum's leader, "
                    "remove the directory")
            return
        self.snapshot, end = latest, start + len(self.entries)
        last = latest.end_offset - 1
        if start <= last < end and self.entries[last - start].term == latest.term:
            older = self._snapshot_ending(start)
            if start == 0 or older is not None:
                self.start_term = older.term if older is not None else 0
                self._kept = [s.snapshot_id for s in (older, latest) if s is not None]
                return
            self._rewrite(self.entries[latest.end_offset - start:], latest.end_offset)
        elif not (self.entries and start == latest.end_offset):
            if self.entries:
                log.warning("the metadata log in %s does not match snapshot %s; dropping it",
                            self.directory, latest.snapshot_id)
            self._rewrite([], latest.end_offset)
        self.start_term, self._kept = latest.term, [latest.snapshot_id]

    def _snapshot_ending(self, offset: int) -> Snapshot | None:
        for snapshot_id in self.snapshots.ids():
            if snapshot_id[0] == offset:
                return self.snapshots.read(snapshot_id)
        return None

    @_io
    def save_vote(self, term: int, voted_for: int | None) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(json.dumps({"term": term, "voted_for": voted_for}).encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)
        fsync_directory(self.directory)
        self.term, self.voted_for = term, voted_for

    @_io
    def append(self, entries: list[Entry]) -> None:
        assert self._file is not None
        position = self._file.tell()
        lines = _lines(entries, log_end_offset(self))
        for line in lines:
            self._positions.append(position)
            position += len(line)
        self._file.write(b"".join(lines))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.entries.extend(entries)

    @_io
    def truncate(self, end_offset: int) -> None:
        assert self._file is not None
        if end_offset >= log_end_offset(self):
            return
        keep = max(end_offset - self.start_offset, 0)
        self._file.flush()
        os.truncate(self.log_path, self._positions[keep])
        os.fsync(self._file.fileno())
        self._file.seek(0, os.SEEK_END)
        del self.entries[keep:]
        del self._positions[keep:]

    @_io
    def save_snapshot(self, snapshot: Snapshot) -> None:
        plan = plan_retention(self._kept, self.start_offset, log_end_offset(self),
                              term_at(self, snapshot.end_offset - 1), snapshot)
        self.snapshots.write(snapshot)  # durable before anything it replaces goes
        start_term = _start_term(self, plan.start_offset, plan.kept)
        if not plan.keep_log:
            self._rewrite([], plan.start_offset)
        elif plan.start_offset > self.start_offset:
            self._rewrite(self.entries[plan.start_offset - self.start_offset:],
                          plan.start_offset)
        self.start_term, self._kept, self.snapshot = start_term, plan.kept, snapshot
        self.snapshots.delete_except(plan.kept)

    def _rewrite(self, entries: list[Entry], start_offset: int) -> None:
        """Replace the log file by `entries` from `start_offset`, atomically."""
        lines = _lines(entries, start_offset)
        tmp = self.log_path.with_suffix(".jsonl.tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(lines))
            f.flush()
            os.fsync(f.fileno())
        if self._file is not None:
            self._file.close()
        os.replace(tmp, self.log_path)
        fsync_directory(self.directory)
        if self._file is not None:
            self._file = open(self.log_path, "ab")  # noqa: SIM115
        self.entries, self.start_offset = list(entries), start_offset
        self._positions = list(itertools.accumulate((len(line) for line in lines[:-1]),
                                                    initial=0)) if lines else []

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _lines(entries: list[Entry], first_offset: int) -> list[bytes]:
    return [json.dumps({"offset": first_offset + i, "term": e.term, "control": e.control,
                        "record": e.record}, separators=(",", ":")).encode() + b"\n"
            for i, e in enumerate(entries)]


def _parse_line(line: bytes, expected_offset: int | None) -> tuple[int, Entry] | None:
    """The line's offset and entry; None if it is torn or not the offset expected (the
    first line may start the log anywhere)."""
    if not line.endswith(b"\n"):
        return None
    try:
        raw = json.loads(line)
        offset = raw["offset"]
        if type(offset) is not int or offset < 0 or expected_offset not in (None, offset):
            return None
        return offset, Entry(int(raw["term"]), raw["record"], bool(raw["control"]))
    except (ValueError, KeyError, TypeError):
        return None
