"""The groups one coordinator serves, and the writes to the partitions they live on.

`classic` holds the groups of the classic protocol (JoinGroup), `consumer` those of KIP-848
(ConsumerGroupHeartbeat); a group id is in at most one of them. A group lives on the
`__consumer_offsets` partition of its id (`partition_of`) and is served only while this
broker leads that partition and has loaded it (`check_coordinator`).

A write goes to the leader's log at once (`write`), so writes keep the order they were made
in, and counts once the in-sync replicas have it (`replicated`, or `after_replicated` for a
caller that must not wait).

`GroupCoordinator` owns this table, fills it by replaying the log and empties it when a
partition is lost; the protocol parts (`Membership`, `ConsumerProtocol`, `Offsets`) are
handed it, and find, create and write groups through it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from brokercore.clock import Clock
from brokercore.log.verification import VerificationGuard
from brokercore.protocol.errors import ErrorCode

from .consumer_group import ConsumerGroup
from .offsets_topic import OffsetsStore, Producer
from .records import KeyValue, partition_for
from .state import Group, GroupError


class Groups:
    def __init__(
        self, store: OffsetsStore, check: Callable[[int], ErrorCode], clock: Clock,
        commit_timeout_ms: int, spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.store = store
        self._check = check  # the partition's loading: NONE, or why it is not served here
        self.clock = clock
        self.commit_timeout_ms = commit_timeout_ms
        self._spawn = spawn
        self.classic: dict[str, Group] = {}
        self.consumer: dict[str, ConsumerGroup] = {}

    # -- finding groups -------------------------------------------------------------------
    def get(self, group_id: str) -> Group | ConsumerGroup | None:
        """The group of that id, of either protocol."""
        return self.classic.get(group_id) or self.consumer.get(group_id)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.store.num_partitions)

    def check_coordinator(self, group_id: str) -> int:
        """This broker's partition for the group, once loaded; else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS (both retriable)."""
        partition = self.partition_of(group_id)
        code = self._check(partition)
        if code != ErrorCode.NONE:
            raise GroupError(code)
        return partition

    def create_classic(self, group_id: str) -> Group:
        group = Group(group_id, self.partition_of(group_id),
                      state_timestamp_ms=self.clock.time_ms())
        self.classic[group_id] = group
        return group

    # -- writing --------------------------------------------------------------------------
    def write(self, partition: int, records: list[KeyValue], producer: Producer = None,
              verification_guard: VerificationGuard | None = None) -> int:
        """Append to the partition's log (as a transactional batch of `producer`, if given,
        verified with `verification_guard`); the offset to pass to `replicated`."""
        return self.store.append(partition, records, self.clock.time_ms(), producer,
                                 verification_guard)

    async def replicated(self, partition: int, offset: int) -> None:
        """Wait until the ISR has the log below `offset`; GroupError in Kafka's mapping."""
        try:
            await self.store.wait_replicated(partition, offset, self.commit_timeout_ms)
        except GroupError as exc:
            if exc.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_LEADER_OR_FOLLOWER):
                raise GroupError(ErrorCode.NOT_COORDINATOR, str(exc)) from None
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from None

    def after_replicated(self, partition: int, offset: int,
                         then: Callable[[GroupError | None], None]) -> None:
        """Call `then` (with the error, if any) once the write below `offset` is replicated."""
        async def wait() -> None:
            try:
                await self.replicated(partition, offset)
            except GroupError as exc:
                then(exc)
            else:
                then(None)
        self._spawn(wait())
