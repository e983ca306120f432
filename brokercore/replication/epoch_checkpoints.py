"""Writing new leaderships' `leader-epoch-checkpoint` files on the disk threads.

A partition that becomes leader records its new epoch in its epoch cache at once
(OffsetForLeaderEpoch answers from memory); the file write (two fsyncs) is queued here and
written a batch per trip, so a fence that hands this broker hundreds of leaderships costs
the event loop no fsync. The log writes a pending epoch before it moves its recovery point,
and recovery re-learns epochs from the batches past it, so a crash before the write loses no
epoch that has records.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping
from concurrent.futures import Executor

from brokercore.topic_partition import TopicPartition

from .partition import Partition

log = logging.getLogger(__name__)


class EpochCheckpoints:
    def __init__(self, node_id: int, partitions: Mapping[TopicPartition, Partition],
                 disk: Executor, batch: int) -> None:
        self.node_id = node_id
        self.partitions = partitions  # the hosted ones: a write for any other is dropped
        self._disk = disk
        self._batch = batch
        self._to_persist: dict[TopicPartition, Partition] = {}
        self.writer: asyncio.Task[None] | None = None

    def persist_later(self, partition: Partition) -> None:
        self._to_persist[partition.tp] = partition
        if self.writer is None or self.writer.done():
            self.writer = asyncio.create_task(self._persist(),
                                              name=f"epoch-checkpoints-{self.node_id}")

    def forget(self, tp: TopicPartition) -> None:
        self._to_persist.pop(tp, None)

    async def _persist(self) -> None:
        """A batch per trip to the threads. Each is a snapshot taken here, on the loop; a
        newer change writes its own."""
        loop = asyncio.get_running_loop()
        while self._to_persist:
            batch = [self._to_persist.pop(tp)
                     for tp in list(itertools.islice(self._to_persist, self._batch))]
            await asyncio.gather(*(
                loop.run_in_executor(self._disk, self._write, loop, p, p.log.epochs.snapshot())
                for p in batch if self.partitions.get(p.tp) is p))

    def _write(self, loop: asyncio.AbstractEventLoop, partition: Partition,
               snapshot: tuple[int, list[tuple[int, int]]]) -> None:
        """On a disk thread. An I/O error fails the log on the loop, and its dir with it."""
        try:
            partition.log.epochs.persist(snapshot)
        except OSError as exc:
            loop.call_soon_threadsafe(self._not_written, partition, exc)

    def _not_written(self, partition: Partition, error: OSError) -> None:
        # A partition removed meanwhile had its directory deleted under the write: no fault.
        if self.partitions.get(partition.tp) is partition:
            log.error("node %d: cannot write the epoch checkpoint of %s: %s", self.node_id,
                      partition.tp, error)
            partition.log.fail(error)
