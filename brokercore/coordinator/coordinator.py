"""The group coordinator of one broker: the groups whose `__consumer_offsets` partition it leads.

It owns the `groups` table and is its only writer, on the event loop. Membership and offsets
logic live in `Membership` and `Offsets`; this class finds groups, persists and replays them,
and runs the deadline sweep (`tick`) that expires sessions, phases and old offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from brokercore.clock import Clock
from brokercore.config import BrokerConfig
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .membership import Membership
from .offsets import Offsets
from .offsets_topic import OffsetsStore
from .records import (
    GroupRecord,
    KeyValue,
    MemberRecord,
    OffsetsRecord,
    group_key,
    group_value,
    partition_for,
)
from .state import Group, GroupError, GroupState, Member

log = logging.getLogger(__name__)
S = GroupState
TICK_SECONDS = 0.1


@dataclass(frozen=True)
class CoordinatorConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 10080 * 60_000
    retention_check_interval_ms: int = 600_000
    metadata_max_bytes: int = 4096
    commit_timeout_ms: int = 5000

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> CoordinatorConfig:
        return cls(
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            max_size=config.get_int("group.max.size"),
            offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
            metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
            commit_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
        )


class GroupCoordinator:
    def __init__(
        self, store: OffsetsStore, clock: Clock, config: CoordinatorConfig,
        topic_exists: Callable[[TopicPartition], bool] = lambda tp: True,
    ) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.topic_exists = topic_exists
        self.groups: dict[str, Group] = {}
        self.loaded: dict[int, int] = {}  # partition -> the leader epoch it was loaded in
        self._background: set[asyncio.Task[None]] = set()
        self.membership = Membership(self)
        self.offsets = Offsets(self)
        self._task: asyncio.Task[None] | None = None
        self._next_expiry = clock.monotonic() + config.retention_check_interval_ms / 1000

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self.refresh_partitions()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._background):
            task.cancel()
        for partition in list(self.loaded):
            self.unload_partition(partition)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.tick()
            except Exception:
                log.exception("group coordinator tick failed")

    def tick(self) -> None:
        """Act on every deadline that has passed (the fake clock's tests call this)."""
        self.refresh_partitions()
        for group in list(self.groups.values()):
            self.membership.expire(group)
        if self.clock.monotonic() >= self._next_expiry:
            self._next_expiry = self.clock.monotonic() + (
                self.config.retention_check_interval_ms / 1000)
            self.offsets.expire()

    # -- finding groups -------------------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.store.num_partitions)

    def check_coordinator(self, group_id: str) -> int:
        """This broker's partition for the group, loading it if new; else NOT_COORDINATOR."""
        partition = self.partition_of(group_id)
        self._refresh(partition)
        if partition not in self.loaded:
            raise GroupError(ErrorCode.NOT_COORDINATOR)
        return partition

    def create_group(self, group_id: str) -> Group:
        group = Group(group_id, self.partition_of(group_id),
                      state_timestamp_ms=self.clock.time_ms())
        self.groups[group_id] = group
        return group

    def refresh_partitions(self) -> None:
        """Load partitions this broker now leads; drop the groups of those it lost."""
        for partition in range(self.store.num_partitions):
            self._refresh(partition)

    def _refresh(self, partition: int) -> None:
        """Follow the partition's leadership. A new leader epoch means another broker may
        have led in between, so the state is read again from the log."""
        epoch = self.store.leader_epoch(partition)
        loaded = self.loaded.get(partition)
        if loaded is not None and loaded != epoch:
            self.unload_partition(partition)
        if epoch is not None and partition not in self.loaded:
            self.load_partition(partition, epoch)

    # -- persistence ----------------------------------------------------------------------
    def write(self, partition: int, records: list[KeyValue],
              producer: tuple[int, int] | None = None) -> int:
        """Append to the partition's log (as a transactional batch of `producer`, if given);
        the offset to pass to `replicated`."""
        return self.store.append(partition, records, self.clock.time_ms(), producer)

    async def replicated(self, partition: int, offset: int) -> None:
        """Wait until the ISR has the log below `offset`; GroupError in Kafka's mapping."""
        try:
            await self.store.wait_replicated(partition, offset, self.config.commit_timeout_ms)
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

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def persist_group(self, group: Group, *, raise_errors: bool = False) -> int:
        """Write the group's metadata record (after a sync or on becoming Empty); the offset
        to wait for, or -1 if the write failed and `raise_errors` is off."""
        try:
            return self.write(group.partition, [(group_key(group.group_id),
                                                 group_value(group_record(group)))])
        except GroupError as exc:
            log.warning("group %s: cannot store its metadata: %s", group.group_id, exc)
            if raise_errors:
                raise
            return -1

    def load_partition(self, partition: int, epoch: int = 0) -> None:
        offsets: dict[str, dict[TopicPartition, OffsetsRecord]] = {}
        metadata: dict[str, GroupRecord | None] = {}
        for record in self.offsets.replay_transactions(partition, self.store.replay(partition)):
            if record.tp is not None:
                offsets.setdefault(record.group_id, {})[record.tp] = record
            else:
                metadata[record.group_id] = record.group
        for group_id in offsets.keys() | metadata.keys():
            live = {tp: r.offset for tp, r in offsets.get(group_id, {}).items()
                    if r.offset is not None}
            stored = metadata.get(group_id)
            if stored is None and not live:
                continue
            group = self.create_group(group_id)
            group.offsets.update(live)
            if stored is not None:
                self._restore(group, stored)
        self.loaded[partition] = epoch
        log.info("loaded __consumer_offsets-%d in leader epoch %d: %d group(s)", partition, epoch,
                 sum(1 for g in self.groups.values() if g.partition == partition))

    def _restore(self, group: Group, stored: GroupRecord) -> None:
        """Replay a group's metadata: its members stay members for one session timeout."""
        group.protocol_type = stored.protocol_type
        group.generation_id = stored.generation_id
        group.state_timestamp_ms = stored.state_timestamp_ms
        if not stored.members or stored.protocol_name is None:
            return
        group.protocol_name = stored.protocol_name
        now = self.clock.monotonic()
        for m in stored.members:
            group.add_member(Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.session_timeout_ms, m.rebalance_timeout_ms, stored.protocol_type,
                [(stored.protocol_name, m.subscription)], m.assignment,
                heartbeat_deadline=now + m.session_timeout_ms / 1000,
            ))
        group.leader_id = stored.leader_id if stored.leader_id in group.members else None
        group.state = S.STABLE  # replay sets state directly: it reproduces a past transition

    def unload_partition(self, partition: int) -> None:
        for group in [g for g in self.groups.values() if g.partition == partition]:
            for member in group.members.values():
                self.membership.fail_waiters(member, ErrorCode.NOT_COORDINATOR)
            del self.groups[group.group_id]
        self.offsets.unload(partition)
        self.loaded.pop(partition, None)

    # -- ListGroups and DescribeGroups ----------------------------------------------------
    def list_groups(self, states: set[str] | None = None) -> list[Group]:
        self.refresh_partitions()
        lowered = {s.lower() for s in states} if states else None
        return [g for g in self.groups.values()
                if lowered is None or g.state.value.lower() in lowered]

    def describe_group(self, group_id: str) -> Group | None:
        self.check_coordinator(group_id)
        return self.groups.get(group_id)


def group_record(group: Group) -> GroupRecord:
    protocol = group.protocol_name
    members = tuple(
        MemberRecord(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.rebalance_timeout_ms, m.session_timeout_ms,
            m.metadata_for(protocol) if protocol else b"", m.assignment,
        )
        for m in group.members.values()
    ) if protocol else ()
    return GroupRecord(group.protocol_type or "", group.generation_id, protocol,
                       group.leader_id, group.state_timestamp_ms, members)
