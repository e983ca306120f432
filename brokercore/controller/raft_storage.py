"""What a quorum member must not forget: its term, its vote and its log of entries.

Raft is only safe if the term and vote are durable before a vote is granted, and log
entries are durable before they are acknowledged; both storages here keep that promise
(`FileRaftStorage` by fsync, `MemoryRaftStorage` by outliving the node in tests).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from brokercore.log.checkpoint import fsync_directory

from .image import Record

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


class RaftStorage(Protocol):
    term: int
    voted_for: int | None
    entries: list[Entry]

    def save_vote(self, term: int, voted_for: int | None) -> None: ...

    def append(self, entries: list[Entry]) -> None: ...

    def truncate(self, end_offset: int) -> None:
        """Drop every entry at `end_offset` and after."""
        ...

    def close(self) -> None: ...


class MemoryRaftStorage:
    """Storage that survives a simulated crash by outliving the node object (tests)."""

    def __init__(self) -> None:
        self.term = 0
        self.voted_for: int | None = None
        self.entries: list[Entry] = []

    def save_vote(self, term: int, voted_for: int | None) -> None:
        self.term, self.voted_for = term, voted_for

    def append(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)

    def truncate(self, end_offset: int) -> None:
        del self.entries[end_offset:]

    def close(self) -> None:
        pass


class FileRaftStorage:
    """Term, vote and log in `directory`, fsynced before any call returns.

    On-disk format:
    - `quorum-state.json`: `{"term": T, "voted_for": N or null}`, replaced atomically
      (write a temporary file, fsync, rename, fsync the directory).
    - `raft.jsonl`: one entry per line,
      `{"offset": N, "term": T, "control": bool, "record": {...}}\\n`, offsets dense from 0.
      A tail torn by a crash (no newline, not JSON, or an offset out of sequence) is cut
      off on open; that is safe because an entry is acknowledged only once fsynced.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.state_path = directory / "quorum-state.json"
        self.log_path = directory / "raft.jsonl"
        self.term, self.voted_for = self._load_state()
        self.entries: list[Entry] = []
        self._positions: list[int] = []  # byte position of each entry's line
        self._recover_log()
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
                entry = _parse_line(line, len(self.entries))
                if entry is None:
                    break
                self._positions.append(good_bytes)
                self.entries.append(entry)
                good_bytes += len(line)
        if good_bytes < self.log_path.stat().st_size:
            log.warning("truncating torn raft log tail at byte %d of %s", good_bytes,
                        self.log_path)
            os.truncate(self.log_path, good_bytes)

    def save_vote(self, term: int, voted_for: int | None) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(json.dumps({"term": term, "voted_for": voted_for}).encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)
        fsync_directory(self.directory)
        self.term, self.voted_for = term, voted_for

    def append(self, entries: list[Entry]) -> None:
        position = self._file.tell()
        lines = []
        for i, entry in enumerate(entries):
            line = json.dumps(
                {"offset": len(self.entries) + i, "term": entry.term, "control": entry.control,
                 "record": entry.record},
                separators=(",", ":"),
            ).encode() + b"\n"
            self._positions.append(position)
            position += len(line)
            lines.append(line)
        self._file.write(b"".join(lines))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.entries.extend(entries)

    def truncate(self, end_offset: int) -> None:
        if end_offset >= len(self.entries):
            return
        self._file.flush()
        os.truncate(self.log_path, self._positions[end_offset])
        os.fsync(self._file.fileno())
        self._file.seek(0, os.SEEK_END)
        del self.entries[end_offset:]
        del self._positions[end_offset:]

    def close(self) -> None:
        self._file.close()


def _parse_line(line: bytes, expected_offset: int) -> Entry | None:
    if not line.endswith(b"\n"):
        return None
    try:
        raw = json.loads(line)
        if raw["offset"] != expected_offset:
            return None
        return Entry(int(raw["term"]), raw["record"], bool(raw["control"]))
    except (ValueError, KeyError, TypeError):
        return None

