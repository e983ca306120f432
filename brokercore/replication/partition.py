"""One partition replica on this broker: its log, its role, its high watermark and ISR view.

A `Partition` is owned by the broker's event loop; every method is synchronous except the
waits. As leader it tracks each follower's log end offset and last caught-up time (from
their Fetch requests) and moves the high watermark to the smallest log end over the ISR.
As follower it only holds what its fetcher appended and the leader's high watermark.
Anything waiting on it (long-polling fetches, acks=all produces) is woken by `wake_waiters`
whenever the log end, the high watermark, the ISR or the leadership changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from brokercore.log import AppendResult, LogConfig, PartitionLog
from brokercore.log.verification import VerificationGuard
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

UNKNOWN_OFFSET = -1
T = TypeVar("T")


class PartitionError(Exception):
    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code


@dataclass
class ReplicaState:
    """What the leader knows of one follower, from that follower's fetches (Kafka's Replica)."""

    log_end_offset: int = UNKNOWN_OFFSET  # unknown until it fetches in this leader epoch
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end: int = UNKNOWN_OFFSET


class Partition:
    def __init__(
        self, tp: TopicPartition, topic_id: str, log: PartitionLog, node_id: int,
        high_watermark: int = 0,
    ) -> None:
        self.tp = tp
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.min_insync_replicas = 1
        # The ISR we asked the controller for and have not seen applied yet (one at a time).
        self.pending_isr: list[int] | None = None
        self.followers: dict[int, ReplicaState] = {}
        # ISR followers this leader found out of sync (replica.lag.time.max.ms), whether or
        # not the controller has taken them out of the ISR yet: it cannot while the metadata
        # quorum is lost, and acks=all must not wait on them meanwhile.
        self.out_of_sync: frozenset[int] = frozenset()
        self.leader_epoch_start_offset = 0
        self.high_watermark = min(high_watermark, log.log_end_offset)
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction has ended: what read_committed consumers may read."""
        return min(self.high_watermark, self.log.first_unstable_offset())

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR as far as the high watermark goes while a change is in flight (KIP-497):
        an expansion counts already, a shrink not yet."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    @property
    def in_sync_size(self) -> int:
        """How many replicas min.insync.replicas counts: the ISR less the followers this
        leader knows to be out of sync."""
        return len([r for r in self.isr if r not in self.out_of_sync])

    def mark_out_of_sync(self, replicas: list[int]) -> None:
        """The leader's latest lag check; waiting acks=all produces re-check against it."""
        lagging = frozenset(replicas)
        if lagging != self.out_of_sync:
            self.out_of_sync = lagging
            self.wake_waiters()

    # -- role changes (from applied metadata records) ----------------------------------------
    def become_leader(
        self, leader_epoch: int, partition_epoch: int, replicas: list[int], isr: list[int],
        now_ms: int, *, persist_epoch: bool = True,
    ) -> bool:
        """Lead with this registration; True if this starts a new leadership (new epoch).
        Without `persist_epoch` the epoch cache's write is left to the caller."""
        new_leadership = not self.is_leader or leader_epoch != self.leader_epoch
        self.leader = self.node_id
        self._update_assignment(partition_epoch, replicas, isr)
        if new_leadership:
            self.leader_epoch = leader_epoch
            self.pending_isr = None
            self.out_of_sync = frozenset()
            self.leader_epoch_start_offset = self.log_end_offset
            # A follower's epoch lookup must find this epoch even before its first append.
            self.log.assign_epoch(leader_epoch, self.log_end_offset, persist=persist_epoch)
            # Kafka: ISR members count as caught up now, so they are not dropped at once;
            # their log ends are unknown until they fetch, which holds the high watermark.
            self.followers = {
                r: ReplicaState(last_caught_up_ms=now_ms if r in isr else 0)
                for r in replicas if r != self.node_id
            }
        else:
            for r in replicas:
                if r != self.node_id and r not in self.followers:
                    self.followers[r] = ReplicaState()
            for r in [r for r in self.followers if r not in replicas]:
                del self.followers[r]
        self.maybe_increment_high_watermark()
        self.wake_waiters()
        return new_leadership

    def become_follower(
        self, leader: int, leader_epoch: int, partition_epoch: int, replicas: list[int],
        isr: list[int],
    ) -> bool:
        """Follow `leader` (-1: none); True if the leader or its epoch changed."""
        changed = leader != self.leader or leader_epoch != self.leader_epoch
        self.leader = leader
        self.leader_epoch = leader_epoch
        self._update_assignment(partition_epoch, replicas, isr)
        self.pending_isr = None
        self.followers = {}
        self.out_of_sync = frozenset()
        self.wake_waiters()
        return changed

    def _update_assignment(self, partition_epoch: int, replicas: list[int], isr: list[int]) -> None:
        if partition_epoch != self.partition_epoch:
            self.pending_isr = None  # whatever we asked for was decided (or overtaken)
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client that knows a different epoch is fenced or ahead of us."""
        if current_leader_epoch == -1 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise PartitionError(ErrorCode.FENCED_LEADER_EPOCH)
        raise PartitionError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def epoch_end(self, leader_epoch: int) -> tuple[int, int]:
        """Kafka's lastOffsetForLeaderEpoch: (the largest epoch <= `leader_epoch` this log
        has, the offset where it ends); the current epoch ends at the log end, and an
        epoch newer than this leader's is unknown (-1, -1)."""
        if leader_epoch == self.leader_epoch:
            return self.leader_epoch, self.log_end_offset
        if leader_epoch > self.leader_epoch:
            return -1, -1
        return self.log.end_offset_for_epoch(leader_epoch)

    # -- leader: appends, follower progress, high watermark ---------------------------------
    def check_min_insync_replicas(self) -> None:
        """acks=all's precondition: NOT_ENOUGH_REPLICAS while the ISR, less the followers
        found out of sync, is too small."""
        if self.in_sync_size < self.min_insync_replicas:
            lagging = sorted(self.out_of_sync & set(self.isr))
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {self.isr} is less than the minimum ISR "
                f"{self.min_insync_replicas}"
                + (f" (out of sync: {lagging})" if lagging else ""),
            )

    def append_as_leader(self, records: bytes | memoryview,
                         verification_guard: VerificationGuard | None = None) -> AppendResult:
        result = self.log.append_as_leader(records, self.leader_epoch, verification_guard)
        if not result.duplicate:
            self.bytes_in += len(records)
            self.messages_in += result.record_count
        self.maybe_increment_high_watermark()
        self.wake_waiters()
        return result

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int,
                                             producer_epoch: int) -> VerificationGuard:
        """KIP-890: the guard a transactional append must carry once the coordinator has
        verified it; SENTINEL if the producer's transaction is open here already."""
        return self.log.maybe_start_transaction_verification(producer_id, sequence,
                                                             producer_epoch)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int) -> AppendResult:
        """End a producer's transaction here with a commit or abort marker."""
        result = self.log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                        self.leader_epoch)
        self.maybe_increment_high_watermark()
        self.wake_waiters()
        return result

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                              now_ms: int) -> bool:
        """A follower fetched from `fetch_offset`, its log end, and reported its log start.
        False if it is no replica.

        Kafka's rule for last caught-up time: a fetch at the leader's log end means caught up
        now; a fetch at or past the log end of the follower's previous fetch means it was
        caught up when that previous fetch happened.
        """
        state = self.followers.get(replica_id)
        if state is None:
            return False
        leader_end = self.log_end_offset
        if fetch_offset >= leader_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
            if replica_id in self.out_of_sync:
                self.mark_out_of_sync([r for r in self.out_of_sync if r != replica_id])
        elif fetch_offset >= state.last_fetch_leader_log_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        state.last_fetch_leader_log_end = leader_end
        if log_start_offset != state.log_start_offset:
            state.log_start_offset = log_start_offset
            self.wake_waiters()  # a DeleteRecords may be waiting for it
        self.maybe_increment_high_watermark()
        return True

    def low_watermark(self, alive: set[int]) -> int:
        """The smallest log start over this leader and its live followers (Kafka's
        lowWatermarkIfLeader): how far DeleteRecords has reached on every replica."""
        starts = [self.log_start_offset]
        starts += [state.log_start_offset for r, state in self.followers.items() if r in alive]
        return min(starts)

    async def wait_for_low_watermark(self, offset: int, alive: Callable[[], set[int]],
                                     max_wait: float) -> tuple[ErrorCode, int]:
        """Wait until every live replica's log start is at or past `offset`: (NONE, the low
        watermark), NOT_LEADER_OR_FOLLOWER if this leadership ends first, or
        REQUEST_TIMED_OUT after `max_wait` seconds."""
        def reached() -> int | None:
            low = self.low_watermark(alive())
            return low if low >= offset else None

        found = await self._wait_while_leading(reached, max_wait)
        if isinstance(found, ErrorCode):
            return found, UNKNOWN_OFFSET
        return ErrorCode.NONE, found

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark up to the smallest log end over the (maximal) ISR."""
        if not self.is_leader:
            return False
        ends = [self.log_end_offset]
        for r in self.maximal_isr:
            if r != self.node_id:
                state = self.followers.get(r)
                ends.append(state.log_end_offset if state else UNKNOWN_OFFSET)
        candidate = min(ends)
        if candidate <= self.high_watermark:
            return False
        self.high_watermark = candidate
        self.wake_waiters()
        return True

    def out_of_sync_replicas(self, now_ms: int, lag_max_ms: int) -> list[int]:
        """ISR followers not caught up to the leader's log end within `lag_max_ms`."""
        return [
            r for r in self.isr
            if r != self.node_id and r in self.followers
            and now_ms - self.followers[r].last_caught_up_ms > lag_max_ms
        ]

    def may_join_isr(self, replica_id: int) -> bool:
        """Kafka's rule: a follower outside the ISR that has reached the high watermark and
        holds this leader epoch's first offset."""
        state = self.followers.get(replica_id)
        return (
            self.is_leader and state is not None and replica_id not in self.isr
            and state.log_end_offset >= self.high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
        )

    async def wait_until_replicated(self, offset: int, max_wait: float) -> ErrorCode:
        """Wait until the high watermark is above `offset` (the last offset of an append).

        NONE when it is and the ISR still meets min.insync.replicas;
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when it got there on a shrunken ISR, or cannot
        because the followers still in sync are too few;
        NOT_LEADER_OR_FOLLOWER when this leadership ends first; REQUEST_TIMED_OUT after
        `max_wait` seconds.
        """
        def committed() -> ErrorCode | None:
            if self.high_watermark <= offset:
                if self.in_sync_size < self.min_insync_replicas:
                    return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                return None
            if len(self.maximal_isr) < self.min_insync_replicas:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return ErrorCode.NONE

        return await self._wait_while_leading(committed, max_wait)

    async def _wait_while_leading(self, settled: Callable[[], T | None],
                                  max_wait: float) -> T | ErrorCode:
        """Ask `settled` again on every change until it answers: its answer, or
        NOT_LEADER_OR_FOLLOWER if this leadership ends first, or REQUEST_TIMED_OUT after
        `max_wait` seconds."""
        epoch = self.leader_epoch
        deadline = asyncio.get_running_loop().time() + max_wait
        while True:
            if not self.is_leader or self.leader_epoch != epoch:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            answer = settled()
            if answer is not None:
                return answer
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            await wait_for_data([self], remaining)

    # -- follower: what the fetcher brings --------------------------------------------------
    def append_as_follower(self, records: bytes | memoryview) -> AppendResult:
        result = self.log.append_as_follower(records)
        self.wake_waiters()
        return result

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        candidate = min(leader_high_watermark, self.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    # -- waiting ------------------------------------------------------------------------------
    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def discard_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def update_config(self, config: LogConfig) -> None:
        self.log.update_config(config)


async def wait_for_data(partitions: Iterable[Partition], max_wait: float) -> None:
    """Return when any of the partitions gets new data (or a change of its high watermark or
    leadership), or after max_wait seconds."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    parts = list(partitions)
    for partition in parts:
        partition.add_waiter(waiter)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter, max_wait)
    finally:
        for partition in parts:
            partition.discard_waiter(waiter)
