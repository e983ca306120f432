"""Moving a replica to another log dir of the same broker (AlterReplicaLogDirs, API 34)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable

from brokercore.log import PartitionLog
from brokercore.log.checkpoint import fsync_directory

from .log_dirs import PARTITION_DIR, LogDir
from .partition import Partition

log = logging.getLogger(__name__)

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
CHUNK_BYTES = 1 << 20


class ReplicaMove:
    """Copies a replica's log into a future log in another dir, then swaps them.

    The future log, `<topic>-<partition>.<id>-future` in the destination dir, is appended
    batch by batch from the current log (offsets, epochs and producer state kept, as a
    follower's) while the current log keeps taking writes; a divergent tail (the current
    log truncated by replication) is cut from the future log by leader epoch. When a copy
    step leaves no lag, the swap runs in one step of the event loop, so no append falls
    between: the future log is closed (flushed, clean-shutdown marker), the current
    directory is renamed to `<topic>-<partition>.<id>-delete`, the future directory is
    renamed to `<topic>-<partition>`, the partition reopens its log there and the renamed
    old directory is deleted.

    Recovery after a crash (`recover_moves`, before any log is opened) keeps one
    consistent log: a `-future` directory next to a current `<topic>-<partition>`
    (anywhere) is an unfinished copy and is deleted, the move lost; a `-future`
    directory without one exists only between the two renames, when the copy was complete,
    and becomes the current log; a `-delete` directory is deleted once a current log exists
    (it is the old log after the second rename). While a dir is offline nothing is
    recovered: the current log might be on it.
    """

    def __init__(self, partition: Partition, destination: LogDir,
                 on_done: Callable[[ReplicaMove], None]) -> None:
        self.partition = partition
        self.destination = destination
        self._on_done = on_done
        self._tag = uuid.uuid4().hex
        self.completed = False
        path = destination.path / f"{partition.tp}.{self._tag}{FUTURE_SUFFIX}"
        current = partition.log
        self.future = PartitionLog.open(path, current.config, current.clock)
        self.task = asyncio.create_task(self._run())

    @property
    def lag(self) -> int:
        """How far the future log is behind the current one (DescribeLogDirs' offset lag)."""
        return max(self.partition.log.log_end_offset - self.future.log_end_offset, 0)

    @property
    def size_in_bytes(self) -> int:
        return self.future.size_in_bytes

    async def _run(self) -> None:
        try:
            while True:
                if not self._copy() and not self.lag:
                    break
                await asyncio.sleep(0)  # a chunk at a time, between the event loop's work
            self._swap()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("moving %s to %s failed", self.partition.tp, self.destination.path)
            self.future.delete()
        self._on_done(self)

    def cancel(self) -> None:
        """Stop the move and delete the future log; the current log stays."""
        self.task.cancel()
        self.future.delete()

    def _copy(self) -> int:
        """Append the next batches of the current log to the future one; bytes copied."""
        current, future = self.partition.log, self.future
        self._align(current, future)
        if future.log_end_offset >= current.log_end_offset:
            return 0
        data = current.read(future.log_end_offset, CHUNK_BYTES)
        if not data.records:
            return 0
        future.append_as_follower(data.records)
        return len(data.records)

    @staticmethod
    def _align(current: PartitionLog, future: PartitionLog) -> None:
        """Restart the future log below the current log start; cut a diverged tail."""
        if future.log_end_offset < current.log_start_offset or (
                future.size_in_bytes == 0 and future.log_end_offset != current.log_start_offset):
            first = current.read(current.log_start_offset, 1).first_offset
            future.truncate_fully_and_start_at(
                first if first >= 0 else current.log_start_offset)
            return
        epoch = future.latest_epoch()
        if epoch is not None:
            _, end = current.end_offset_for_epoch(epoch)
            if 0 <= end < future.log_end_offset:
                future.truncate_to(end)

    def _swap(self) -> None:
        partition, current = self.partition, self.partition.log
        self.future.set_log_start_offset(current.log_start_offset)
        self.future.close()
        current.close()
        old = current.directory
        doomed = old.with_name(f"{old.name}.{self._tag}{DELETE_SUFFIX}")
        os.replace(old, doomed)
        fsync_directory(old.parent)
        target = self.destination.path / old.name
        os.replace(self.future.directory, target)
        fsync_directory(target.parent)
        # The log dirs' checkpoints list it in its new dir only from their next write.
        partition.log = PartitionLog.open(target, current.config, current.clock,
                                          log_start_offset=current.log_start_offset)
        shutil.rmtree(doomed, ignore_errors=True)
        self.completed = True
        log.info("moved %s to %s", partition.tp, self.destination.path)


def recover_moves(dirs: list[LogDir]) -> None:
    """Leave one log per partition after a crash mid-move (see `ReplicaMove`)."""
    online = [d for d in dirs if d.online]
    if len(online) < len(dirs):
        # The current log may be on the offline dir: leave every move as it is for now.
        log.warning("a log dir is offline: interrupted moves are left until it is back")
        return
    current = {p.name for d in online for p in d.path.iterdir() if PARTITION_DIR.match(p.name)}
    for suffix in (FUTURE_SUFFIX, DELETE_SUFFIX):
        for d in online:
            for path in sorted(d.path.glob(f"*{suffix}")):
                name = path.name.rsplit(".", 1)[0]
                if suffix == FUTURE_SUFFIX and name not in current:
                    log.info("completing the interrupted move of %s into %s", name, d.path)
                    os.replace(path, d.path / name)
                    current.add(name)
                else:
                    log.info("deleting %s, left by an interrupted move", path)
                    with contextlib.suppress(OSError):
                        shutil.rmtree(path)

