"""KIP-848 consumer groups on a fake clock and in-memory `__consumer_offsets`, no sockets."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from brokercore.clock import FakeClock
from brokercore.coordinator.assignors import range_, uniform
from brokercore.coordinator.config import CoordinatorConfig
from brokercore.coordinator.consumer_group import Assignment, ConsumerGroupState
from brokercore.coordinator.consumer_protocol import HeartbeatRequest, HeartbeatResult
from brokercore.coordinator.coordinator import GroupCoordinator
from brokercore.coordinator.offsets_topic import MemoryOffsetsTopic
from brokercore.coordinator.state import GroupError
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .harness import Harness

OK = ErrorCode.NONE
T = str(uuid.uuid4())  # the topic id of "t"
SESSION_MS = 45_000


@dataclass
class Consumers:
    """A coordinator whose topics the test controls, and the members' own view."""

    clock: FakeClock = field(default_factory=FakeClock)
    store: MemoryOffsetsTopic = field(default_factory=MemoryOffsetsTopic)
    topics: dict[str, tuple[str, int]] = field(default_factory=lambda: {"t": (T, 4)})
    owned: dict[str, Assignment] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    config: CoordinatorConfig = field(
        default_factory=lambda: CoordinatorConfig(consumer_session_timeout_ms=SESSION_MS))

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        self.coordinator = GroupCoordinator(self.store, self.clock, self.config,
                                            topics=lambda: dict(self.topics))
        self.coordinator.refresh_partitions()

    async def beat(self, member: str, epoch: int | None = None,
                   names: tuple[str, ...] = ("t",), **kw: object) -> HeartbeatResult:
        """A heartbeat as librdkafka sends it: its own epoch and owned partitions, and on
        joining (an unknown member, or epoch 0) its subscription."""
        if epoch is None:
            epoch = self.epochs.get(member, 0)
        joining = epoch == 0
        request = HeartbeatRequest(
            group_id="g", member_id=member, member_epoch=epoch,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=names if joining else None,
            owned=None if joining else self.owned.get(member, {}), **kw)  # type: ignore
        result = await self.coordinator.consumer.heartbeat(request)
        if result.error_code == OK:
            self.epochs[member] = result.member_epoch
            if result.assignment is not None:
                self.owned[member] = result.assignment
        return result

    async def settle(self, *members: str, rounds: int = 6) -> None:
        for _ in range(rounds):
            for member in members:
                assert (await self.beat(member)).error_code == OK

    def partitions(self, member: str) -> set[int]:
        return set(self.owned.get(member, {}).get(T, frozenset()))

    def assert_no_double_ownership(self) -> None:
        owned = [p for a in self.owned.values() for p in a.get(T, frozenset())]
        assert len(owned) == len(set(owned)), self.owned


def state(c: Consumers) -> ConsumerGroupState:
    return c.coordinator.groups.consumer["g"].state


async def test_a_lone_member_gets_every_partition_at_epoch_one() -> None:
    c = Consumers()
    result = await c.beat("a")
    assert (result.error_code, result.member_epoch) == (OK, 1)
    assert c.partitions("a") == {0, 1, 2, 3}
    assert state(c) is ConsumerGroupState.STABLE


async def test_a_second_member_gets_partitions_only_after_the_first_revoked_them() -> None:
    c = Consumers()
    await c.beat("a")
    joined = await c.beat("b")
    assert joined.member_epoch == 2 and c.partitions("b") == set()  # still owned by "a"
    assert state(c) is ConsumerGroupState.RECONCILING
    revoke = await c.beat("a")
    assert revoke.member_epoch == 1 and len(c.partitions("a")) == 2  # kept epoch, revoking
    c.assert_no_double_ownership()
    await c.settle("a", "b")
    c.assert_no_double_ownership()
    assert c.partitions("a") | c.partitions("b") == {0, 1, 2, 3}
    assert len(c.partitions("a")) == len(c.partitions("b")) == 2
    assert c.epochs == {"a": 2, "b": 2}
    assert state(c) is ConsumerGroupState.STABLE


async def test_a_member_that_leaves_frees_its_partitions_for_the_others() -> None:
    c = Consumers()
    await c.beat("a")
    await c.beat("b")
    await c.settle("a", "b")
    left = await c.beat("b", epoch=-1)
    assert (left.error_code, left.member_epoch) == (OK, -1)
    c.owned.pop("b")
    await c.settle("a")
    assert c.partitions("a") == {0, 1, 2, 3}


async def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    c = Consumers()
    await c.beat("a")
    await c.beat("b")
    await c.settle("a", "b")
    c.clock.advance(SESSION_MS / 2000)
    await c.beat("a")
    c.clock.advance(SESSION_MS / 2000 + 0.1)
    c.coordinator.tick()
    assert set(c.coordinator.groups.consumer["g"].members) == {"a"}
    await c.settle("a")
    assert c.partitions("a") == {0, 1, 2, 3}


async def test_wrong_epochs_and_unknown_members_are_fenced() -> None:
    c = Consumers()
    await c.beat("a")
    assert (await c.beat("a", epoch=7)).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert (await c.beat("zz", epoch=1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_the_previous_epoch_is_accepted_when_the_bump_was_lost() -> None:
    c = Consumers()
    await c.beat("a")
    await c.beat("b")
    await c.settle("a", "b")
    a_epoch = c.epochs["a"]
    c.topics["t"] = (T, 6)  # the next heartbeat bumps the epoch; pretend "a" lost it
    await c.beat("b")
    bumped = await c.beat("a")
    assert bumped.member_epoch > a_epoch
    assert (await c.beat("a", epoch=a_epoch)).error_code == OK


async def test_new_partitions_and_regex_matched_topics_are_assigned() -> None:
    c = Consumers()
    await c.beat("a")
    c.topics["t"] = (T, 6)
    await c.settle("a")
    assert c.partitions("a") == set(range(6))
    other = str(uuid.uuid4())
    regex = await c.beat("r", names=(), subscribed_topic_regex="^o.*")
    assert regex.error_code == OK and c.owned["r"] == {}
    c.topics["other"] = (other, 2)
    await c.settle("a", "r")
    assert c.owned["r"] == {other: frozenset({0, 1})}


async def test_bad_requests_get_the_protocols_errors() -> None:
    c = Consumers()
    bad_regex = await c.beat("a", subscribed_topic_regex="(")
    assert bad_regex.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    unknown = await c.beat("a", server_assignor="sticky")
    assert unknown.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    empty = await c.coordinator.consumer.heartbeat(HeartbeatRequest("", "m", 0))
    assert empty.error_code == ErrorCode.INVALID_REQUEST


async def test_a_static_member_that_comes_back_keeps_its_partitions() -> None:
    c = Consumers()
    await c.beat("a", instance_id="i-1")
    await c.beat("b")
    await c.settle("a", "b")
    a_parts = c.partitions("a")
    twice = await c.beat("a2", instance_id="i-1")
    assert twice.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert (await c.beat("a", epoch=-2, instance_id="i-1")).member_epoch == -2
    back = await c.beat("a2", instance_id="i-1")
    assert back.error_code == OK and c.partitions("a2") == a_parts
    group = c.coordinator.groups.consumer["g"]
    assert set(group.members) == {"a2", "b"}


async def test_a_new_coordinator_replays_epochs_and_assignments() -> None:
    c = Consumers()
    await c.beat("a")
    await c.beat("b")
    await c.settle("a", "b")
    before = c.coordinator.groups.consumer["g"]
    c.restart()
    after = c.coordinator.groups.consumer["g"]
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch,
                                                          before.assignment_epoch)
    assert {m: (x.member_epoch, x.assigned) for m, x in after.members.items()} == {
        m: (x.member_epoch, x.assigned) for m, x in before.members.items()}
    assert after.target == before.target
    await c.settle("a", "b")  # the members carry on with their epochs
    c.assert_no_double_ownership()


async def test_a_failover_keeps_the_group_epoch_when_the_topics_have_not_changed() -> None:
    """Key 4 (the subscribed topics' metadata) is replayed, so the first heartbeat after a
    load finds the topics as the group last saw them: no new epoch, no new target."""
    c = Consumers()
    await c.beat("a")
    await c.beat("b")
    await c.settle("a", "b")
    epochs = c.coordinator.groups.consumer["g"].group_epoch, c.epochs["a"], c.epochs["b"]
    c.restart()
    assert c.coordinator.groups.consumer["g"].subscribed_topics == {"t": (T, 4)}
    await c.settle("a", "b")
    assert (c.coordinator.groups.consumer["g"].group_epoch, c.epochs["a"],
            c.epochs["b"]) == epochs
    c.topics["t"] = (T, 6)  # a real change still moves the group on
    await c.settle("a", "b")
    assert c.coordinator.groups.consumer["g"].group_epoch == epochs[0] + 1


async def test_offset_commits_check_the_member_epoch() -> None:
    c = Consumers()
    await c.beat("a")
    tp = TopicPartition("t", 0)
    commit = c.coordinator.offsets.commit
    assert await commit("g", 1, "a", None, {tp: (5, -1, None)}) == {tp: OK}
    assert await commit("g", 0, "a", None, {tp: (6, -1, None)}) == {
        tp: ErrorCode.STALE_MEMBER_EPOCH}
    assert await commit("g", -1, "", None, {tp: (6, -1, None)}) == {
        tp: ErrorCode.UNKNOWN_MEMBER_ID}
    assert await commit("g", 1, "a", None, {tp: (6, -1, None)}, api_version=8) == {
        tp: ErrorCode.UNSUPPORTED_VERSION}
    fetched = c.coordinator.offsets.fetch("g", [tp], ("a", 1))[tp]
    assert fetched is not None and fetched.offset == 5
    c.restart()
    fetched = c.coordinator.offsets.fetch("g", [tp], (None, -1))[tp]
    assert fetched is not None and fetched.offset == 5


async def test_with_migration_disabled_a_classic_group_with_members_stays_classic() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=100,
                                         min_session_timeout_ms=1000,
                                         upgrade_enabled=False, downgrade_enabled=False))
    await h.stable_group(1)
    consumer = await h.coordinator.consumer.heartbeat(HeartbeatRequest(
        "g", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",)))
    assert consumer.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert (await h.coordinator.consumer.heartbeat(HeartbeatRequest(
        "cg", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",)))).error_code == OK
    # Kafka serves a classic member in a consumer group whatever the policy.
    classic = await h.join(group_id="cg")
    assert classic.error_code == OK
    await h.coordinator.consumer.heartbeat(HeartbeatRequest("cg", "m", -1))
    assert type(h.coordinator.groups.get("cg")).__name__ == "ConsumerGroup"  # no downgrade
    listed = {(g.group_id, type(g).__name__) for g in h.coordinator.list_groups()}
    assert listed == {("g", "Group"), ("cg", "ConsumerGroup")}
    assert [g.group_id for g in h.coordinator.list_groups(types={"Consumer"})] == ["cg"]


def test_uniform_is_balanced_and_sticky() -> None:
    topics = {"t": (T, 7)}
    first = uniform({"a": {"t"}, "b": {"t"}}, topics, {})
    assert sorted(len(first[m][T]) for m in first) == [3, 4]
    second = uniform({"a": {"t"}, "b": {"t"}, "c": {"t"}}, topics, first)
    assert sorted(len(second[m].get(T, ())) for m in second) == [2, 2, 3]
    for member in ("a", "b"):  # existing members only lose partitions
        assert second[member][T] <= first[member][T]


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    assert range_({"b": {"t"}, "a": {"t"}}, {"t": (T, 5)}, {}) == {
        "a": {T: frozenset({0, 1, 2})}, "b": {T: frozenset({3, 4})}}


async def test_an_empty_consumer_group_is_deleted_or_expires_with_its_offsets() -> None:
    c = Consumers()
    tp = TopicPartition("t", 0)
    await c.beat("a")
    assert await c.coordinator.offsets.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
    assert await c.coordinator.offsets.commit("g", 1, "a", None, {tp: (5, -1, None)}) == {tp: OK}
    await c.beat("a", epoch=-1)
    retention = c.coordinator.config.offsets_retention_ms / 1000
    c.clock.advance(retention / 2)
    c.coordinator.offsets.expire()
    assert "g" in c.coordinator.groups.consumer
    c.clock.advance(retention / 2)
    c.coordinator.offsets.expire()
    assert "g" not in c.coordinator.groups.consumer
    c.restart()
    assert "g" not in c.coordinator.groups.consumer  # the tombstones replay too

    await c.beat("b")
    await c.beat("b", epoch=-1)
    assert await c.coordinator.offsets.delete_group("g") == OK
    assert c.coordinator.offsets.fetch("g", [tp]) == {tp: None}


async def test_members_may_ask_for_the_range_assignor_and_the_size_is_capped() -> None:
    c = Consumers(config=CoordinatorConfig(consumer_session_timeout_ms=SESSION_MS,
                                           consumer_max_size=2))
    await c.beat("b", server_assignor="range")
    await c.beat("a", server_assignor="range")
    await c.settle("a", "b")
    assert c.coordinator.consumer.assignor_of(c.coordinator.groups.consumer["g"]) == "range"
    assert (c.partitions("a"), c.partitions("b")) == ({0, 1}, {2, 3})  # by member id
    full = await c.beat("c")
    assert full.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


async def test_a_failed_write_is_undone_by_reading_the_partition_again() -> None:
    """A heartbeat whose write fails while this broker still leads the partition (an ISR
    below min.insync.replicas) leaves memory ahead of the log: the partition is read again
    from the log, so the group, its members and its offsets stay, and the failed join does
    not (before, the partition's groups and offsets vanished until leadership moved)."""
    c = Consumers()
    await c.beat("a")
    tp = TopicPartition("t", 0)
    assert await c.coordinator.offsets.commit("g", 1, "a", None, {tp: (5, -1, None)}) == {
        tp: OK}
    written = c.store.append

    def refuse(*args: object, **kwargs: object) -> int:
        raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "min.insync.replicas")

    c.store.append = refuse  # type: ignore[method-assign]
    failed = await c.beat("b")
    assert failed.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    c.store.append = written  # type: ignore[method-assign]
    assert (await c.beat("a")).error_code == OK
    assert set(c.coordinator.groups.consumer["g"].members) == {"a"}
    assert c.partitions("a") == {0, 1, 2, 3}
    fetched = c.coordinator.offsets.fetch("g", [tp], (None, -1))[tp]
    assert fetched is not None and fetched.offset == 5


async def test_a_groups_own_configs_set_its_session_timeout_and_heartbeat_interval() -> None:
    configs = {"consumer.session.timeout.ms": "2000", "consumer.heartbeat.interval.ms": "700"}
    c = Consumers()
    c.coordinator = GroupCoordinator(c.store, c.clock, c.config, topics=lambda: dict(c.topics),
                                     group_configs=lambda group_id: configs)
    c.coordinator.refresh_partitions()
    assert (await c.beat("a")).heartbeat_interval_ms == 700
    c.clock.advance(2.5)  # past the group's session timeout, well within the broker's
    c.coordinator.tick()
    assert "a" not in c.coordinator.groups.consumer["g"].members
