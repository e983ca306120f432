"""The checkpoint files in each log dir's root, one line per partition of that dir.

- ``replication-offset-checkpoint``: high watermarks;
- ``recovery-point-offset-checkpoint``: recovery points (everything below is fsynced);
- ``log-start-offset-checkpoint``: log start offsets.

Kafka's format: a version line (``0``), an entry-count line, then one
``<topic> <partition> <offset>`` line per partition. Each is rewritten whole and atomically
(temp file, fsync, rename, fsync dir); topic names hold no spaces. A file that is missing or
unreadable (torn by a crash of an older writer, or damaged) counts as empty, as in Kafka:
the replicas then learn their high watermark from the leader, recover their logs from the
start, and start at their first segment.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from brokercore.log.checkpoint import fsync_directory
from brokercore.topic_partition import TopicPartition

log = logging.getLogger(__name__)

VERSION = 0


def write_offsets(path: Path, offsets: dict[TopicPartition, int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(
        offsets.items(), key=lambda item: (item[0].topic, item[0].partition))]
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w") as file:
        file.write("\n".join(lines) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    """The file's offsets; none if it is missing or unreadable."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad header")
        offsets = {}
        for line in lines[2:]:
            topic, partition, offset = line.split(" ")
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    except (ValueError, IndexError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    return offsets


@dataclass(eq=False)  # one per file name; kept in dicts by identity
class DirCheckpoint:
    """One of the files above across the broker's log dirs, with what each dir's file holds
    (as read at startup, then as last written). `any_dir`: a partition missing from its own
    dir's file may take another dir's entry (it moved since that file was written, or an
    earlier version's single file lists it); a recovery point never does, as the moved log
    was flushed apart from the one that entry describes."""

    name: str
    any_dir: bool
    written: dict[Path, dict[TopicPartition, int]] = field(default_factory=dict)

    def read(self, log_dir: Path) -> None:
        self.written[log_dir] = read_offsets(log_dir / self.name)

    def lookup(self, tp: TopicPartition, log_dir: Path) -> int | None:
        own = self.written.get(log_dir, {})
        if tp in own or not self.any_dir:
            return own.get(tp)
        return next((offsets[tp] for offsets in self.written.values() if tp in offsets), None)

    def stale(self, log_dir: Path, offsets: dict[TopicPartition, int]) -> bool:
        return self.written.get(log_dir) != offsets

    def write(self, log_dir: Path, offsets: dict[TopicPartition, int]) -> None:
        """On a disk thread; `written` is updated on the loop once this returned."""
        write_offsets(log_dir / self.name, offsets)
