"""The leader's side of ISR changes (Kafka's AlterPartitionManager).

A follower that has caught up is proposed into the ISR, and followers out of sync for
`replica.lag.time.max.ms` are proposed out of it. The controller decides: each proposal is
an AlterPartition with the leader and partition epochs the leader knew, at most one per
partition in flight (`Partition.pending_isr`); the ISR itself changes only when the
controller's record is applied, never here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from brokercore.controller.errors import ControllerError

from .partition import Partition

log = logging.getLogger(__name__)

# controller.alter_partition(topic_id, partition, leader_id, leader_epoch, partition_epoch, isr)
AlterPartition = Callable[[str, int, int, int, int, list[int]], Awaitable[Any]]


class IsrChanges:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        # Set by the broker to its controller's alter_partition; without it ISRs never change
        # (a lone broker, or tests that drive metadata themselves).
        self.alter_partition: AlterPartition | None = None
        self.in_flight: set[asyncio.Task[None]] = set()

    def shrink(self, partitions: Iterable[Partition], now_ms: int, lag_max_ms: int) -> None:
        """Propose the followers out of sync for `lag_max_ms` out of each led partition's ISR."""
        for partition in partitions:
            if not partition.is_leader:
                continue
            lagging = partition.out_of_sync_replicas(now_ms, lag_max_ms)
            partition.mark_out_of_sync(lagging)
            if lagging and partition.pending_isr is None:
                log.info("node %d: %s followers %s are out of sync; shrinking ISR %s",
                         self.node_id, partition.tp, lagging, partition.isr)
                self.propose(partition, [r for r in partition.isr if r not in lagging])

    def propose(self, partition: Partition, isr: list[int]) -> None:
        if self.alter_partition is None:
            return
        partition.pending_isr = isr
        task = asyncio.create_task(self._alter(partition, isr))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)

    async def _alter(self, partition: Partition, isr: list[int]) -> None:
        assert self.alter_partition is not None
        try:
            await self.alter_partition(partition.topic_id, partition.tp.partition, self.node_id,
                                       partition.leader_epoch, partition.partition_epoch, isr)
        except ControllerError as exc:  # refused, or the quorum unreachable (timed out)
            log.info("node %d: %s ISR change to %s refused: %s", self.node_id, partition.tp,
                     isr, exc.error_code)
        finally:
            # Accepted: the record is applied by now and has cleared it already.
            if partition.pending_isr is isr:
                partition.pending_isr = None
                partition.maybe_increment_high_watermark()
