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

`LogDirCheckpoints` is their one writer: it takes every hosted partition's values on the
loop, groups them by dir, and rewrites only the files whose contents changed, on the disk
threads, one round at a time.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

from brokercore.log.checkpoint import fsync_directory
from brokercore.topic_partition import TopicPartition

from .log_dirs import LogDir
from .partition import Partition

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


class LogDirCheckpoints:
    """The three files of every log dir, written from the values of the partitions hosted
    there (`partitions`, each in the dir `placement` gives). A dir whose write fails is
    handed to `fail_dir`, which takes it offline."""

    def __init__(
        self, node_id: int, log_dirs: list[LogDir], partitions: Mapping[TopicPartition, Partition],
        placement: Mapping[TopicPartition, LogDir], disk: Executor,
        fail_dir: Callable[[LogDir, str], None],
    ) -> None:
        self.node_id = node_id
        self.log_dirs = log_dirs
        self.partitions = partitions
        self.placement = placement
        self._disk = disk
        self._fail_dir = fail_dir
        self.high_watermarks = DirCheckpoint("replication-offset-checkpoint", any_dir=True)
        self.recovery_points = DirCheckpoint("recovery-point-offset-checkpoint", any_dir=False)
        self.log_starts = DirCheckpoint("log-start-offset-checkpoint", any_dir=True)
        self._values: dict[DirCheckpoint, Callable[[Partition], int]] = {  # what each records
            self.high_watermarks: lambda partition: partition.high_watermark,
            self.recovery_points: lambda partition: partition.log.recovery_point,
            self.log_starts: lambda partition: partition.log.log_start_offset,
        }
        self._writing = asyncio.Lock()  # one writer of each file at a time
        self.soon: asyncio.Task[None] | None = None  # `write_logs_soon`'s write
        self._logs_changed = False  # a truncation or a move since `soon` began

    def read(self) -> None:
        """At startup, before any log opens: what each online dir's files hold."""
        for log_dir in self.log_dirs:
            if log_dir.online:
                for file in self._values:
                    file.read(log_dir.path)

    async def write(self, *files: DirCheckpoint) -> None:
        """Rewrite each online dir's files (all three if none is named) that changed, on the
        disk threads, each listing that dir's partitions only. A dir whose write fails goes
        offline; the others are written all the same. A write under way when the caller is
        cancelled (a stop) still finishes before the next one starts: two threads must
        never write one file."""
        async with self._writing:
            online = [d for d in self.log_dirs if d.online]
            writes: list[tuple[DirCheckpoint, LogDir, dict[TopicPartition, int]]] = []
            for file in files or self._values:
                by_dir: dict[Path, dict[TopicPartition, int]] = {d.path: {} for d in online}
                for tp, partition in self.partitions.items():
                    offsets = by_dir.get(self.placement[tp].path)
                    if offsets is not None:
                        offsets[tp] = self._values[file](partition)
                writes += [(file, d, by_dir[d.path]) for d in online
                           if file.stale(d.path, by_dir[d.path])]
            loop = asyncio.get_running_loop()
            writing = asyncio.gather(
                *(loop.run_in_executor(self._disk, file.write, d.path, offsets)
                  for file, d, offsets in writes), return_exceptions=True)
            try:
                results = await asyncio.shield(writing)
            except asyncio.CancelledError:
                await writing
                raise
            for (file, log_dir, offsets), result in zip(writes, results, strict=True):
                if isinstance(result, OSError):
                    self._fail_dir(log_dir, str(result))
                elif isinstance(result, BaseException):
                    log.error("node %d: cannot write %s in %s: %r", self.node_id, file.name,
                              log_dir.path, result)
                else:
                    file.written[log_dir.path] = offsets

    async def upgrade(self) -> None:
        """At startup, once the dirs' checkpoints list every log: the recovery points and
        log starts that earlier versions kept in each partition's directory go."""
        await self.write(self.recovery_points, self.log_starts)
        old = [p.log for tp, p in self.partitions.items()
               if p.log.legacy_checkpoints and tp in self.log_starts.written.get(
                   self.placement[tp].path, {})]
        if old:
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(self._disk, plog.drop_legacy_checkpoints)
                                   for plog in old), return_exceptions=True)

    def write_logs_soon(self) -> None:
        """Kafka writes a dir's recovery points and log starts right after a truncation (or
        a move between dirs); truncations close together share one write."""
        self._logs_changed = True
        if self.soon is None or self.soon.done():
            self.soon = asyncio.create_task(self._write_logs(),
                                            name=f"checkpoint-logs-{self.node_id}")

    async def _write_logs(self) -> None:
        while self._logs_changed:  # one that came during a write is written after it
            self._logs_changed = False
            await self.write(self.recovery_points, self.log_starts)
