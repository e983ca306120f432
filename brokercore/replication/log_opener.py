"""Opening and deleting partition logs off the event loop, a batch per trip to the disk
threads.

Metadata records are applied on the loop, inside the metadata quorum's apply step, so that
step must stay short whatever a record batch holds (a topic of 1,000 partitions is one
batch). The replica manager queues the replicas that need a log (`open_later`) and the logs
of removed ones (`delete_later`); one task takes `OPEN_BATCH` of them at a time to the
threads. Deletions go first in each trip, so a topic deleted and created again under its
name finds its directory gone. Each log to open is planned (`plan`) when its batch is taken,
and handed back (`opened`) on the loop once open, so what the manager decides is read from
the image then, never from the record that queued it. `settled()` waits for the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from brokercore.clock import Clock
from brokercore.log import KafkaStorageError, LogConfig, PartitionLog
from brokercore.topic_partition import TopicPartition

from .log_dirs import LogDir

log = logging.getLogger(__name__)

# Logs opened per trip to the worker thread: a new empty log costs a few file creations, a
# new leadership two fsyncs (its leader-epoch checkpoint), so a batch is tens of ms of disk
# work, and the loop installs one batch in a few ms.
OPEN_BATCH = 50


@dataclass(frozen=True)
class Opening:
    """A log to open off the loop, and the leader epoch to record in it if it will lead."""

    tp: TopicPartition
    topic_id: str
    config: LogConfig
    lead_epoch: int | None
    log_dir: LogDir
    recovery_point: int | None  # the dir's checkpointed values, if it lists the partition
    log_start_offset: int | None


# What became of an opening: the log, the OSError of a failing dir, or None (not opened).
Opened = PartitionLog | OSError | None


class LogOpener:
    def __init__(
        self, node_id: int, clock: Clock, disk: Executor,
        plan: Callable[[TopicPartition, bool], Opening | None],
        opened: Callable[[Opening, Opened], None], watch: Callable[[PartitionLog], None],
    ) -> None:
        self.node_id = node_id
        self.clock = clock
        self._disk = disk
        self._plan = plan  # on the loop: where and how to open it, or None to skip it
        self._opened = opened  # on the loop: host it
        self._watch = watch  # on the thread, before anything can fail it
        # In the order they were assigned; True for a replica new to this broker (assigned
        # after startup), which may be created in any online dir.
        self._to_open: dict[TopicPartition, bool] = {}
        self._to_delete: list[PartitionLog] = []  # removed, files still on disk
        self.task: asyncio.Task[None] | None = None

    def open_later(self, tp: TopicPartition, new: bool) -> None:
        self._to_open[tp] = self._to_open.get(tp, True) and new
        self._start()

    def delete_later(self, plog: PartitionLog) -> None:
        self._to_delete.append(plog)
        self._start()

    async def settled(self, within: float | None = None) -> bool:
        """Wait until every log assigned or removed so far is open or deleted; False if
        that took longer than `within` seconds (the work goes on)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while self.task is not None and not self.task.done():
                    await asyncio.wait([self.task])  # never cancels it
                return True
        return False

    def _start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._open_pending(),
                                            name=f"open-logs-{self.node_id}")

    async def _open_pending(self) -> None:
        loop = asyncio.get_running_loop()
        while self._to_open or self._to_delete:
            to_delete, self._to_delete = self._to_delete, []
            batch = [(tp, self._to_open.pop(tp))
                     for tp in list(itertools.islice(self._to_open, OPEN_BATCH))]
            openings = [o for o in itertools.starmap(self._plan, batch) if o is not None]
            await asyncio.gather(*(loop.run_in_executor(self._disk, self._delete_log, plog)
                                   for plog in to_delete))
            opened = await asyncio.gather(*(loop.run_in_executor(self._disk, self._open_log, o)
                                            for o in openings))
            for opening, plog in zip(openings, opened, strict=True):
                self._opened(opening, plog)

    def _delete_log(self, plog: PartitionLog) -> None:
        """On a disk thread."""
        try:
            plog.delete()
        except OSError:  # the next start deletes it as a stray
            log.exception("node %d: cannot delete %s", self.node_id, plog.directory)

    def _open_log(self, opening: Opening) -> Opened:
        """On a disk thread: the log belongs to no partition yet, nor to the loop. An
        OSError (the dir failing) is returned for the loop to take the dir offline."""
        try:
            plog = PartitionLog.open(opening.log_dir.path / str(opening.tp), opening.config,
                                     self.clock, recovery_point=opening.recovery_point,
                                     log_start_offset=opening.log_start_offset)
            self._watch(plog)
            if opening.lead_epoch is not None:  # as become_leader would, on the loop
                plog.assign_epoch(opening.lead_epoch, plog.log_end_offset)
        except OSError as exc:
            log.error("node %d: cannot open the log of %s: %s", self.node_id, opening.tp, exc)
            return exc
        except KafkaStorageError:  # its dir goes offline (the manager's failure hook)
            return None
        except Exception:
            log.exception("node %d: cannot open the log of %s", self.node_id, opening.tp)
            return None
        return plog
