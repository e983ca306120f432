"""Group APIs at the versions real clients skip, on a raw socket (flexible, batched)."""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.compat.groups import create_topic

Commit = OffsetCommitRequest.OffsetCommitRequestTopic
CommitPartition = Commit.OffsetCommitRequestPartition
FetchGroup = OffsetFetchRequest.OffsetFetchRequestGroup
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"  # v0, no topics, no user data


def _group() -> str:
    return f"wire-{uuid.uuid4().hex[:8]}"


def test_find_coordinator_answers_batched_keys_and_transactional_ids(
    kafka_bootstrap: str,
) -> None:
    with WireClient(kafka_bootstrap) as wire:
        batched = wire.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
        txn = wire.request(FindCoordinatorRequest(key="tx", key_type=1), 3)
        old = wire.request(FindCoordinatorRequest(key="a"), 0)

    assert [(c.key, c.error_code) for c in batched.coordinators] == [("a", 0), ("b", 0)]
    assert {c.port for c in batched.coordinators} == {old.port}
    assert (txn.error_code, txn.port) == (ErrorCode.NONE, old.port)


def _join(wire: WireClient, group: str, member_id: str = "") -> Any:
    return wire.request(JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=None, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                             metadata=SUBSCRIPTION)],
    ), 7)


def test_a_member_runs_the_whole_group_lifecycle_at_flexible_versions(
    kafka_bootstrap: str,
) -> None:
    topic, group = create_topic(kafka_bootstrap, "wire"), _group()
    with WireClient(kafka_bootstrap) as wire:
        first = _join(wire, group)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = _join(wire, group, first.member_id)
        assert (joined.error_code, joined.generation_id, joined.protocol_name) == (0, 1, "range")
        member, generation = joined.member_id, joined.generation_id
        synced = wire.request(SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member,
            protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=member, assignment=b"mine")]), 5)
        assert (synced.error_code, synced.assignment) == (0, b"mine")
        beat = wire.request(HeartbeatRequest(group_id=group, generation_id=generation,
                                             member_id=member), 4)
        assert beat.error_code == 0
        committed = wire.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation, member_id=member,
            topics=[Commit(name=topic, partitions=[CommitPartition(
                partition_index=0, committed_offset=7, committed_leader_epoch=0,
                committed_metadata="meta")])]), 8)
        assert committed.topics[0].partitions[0].error_code == 0

        listed = wire.request(ListGroupsRequest(states_filter=["stable"]), 4)
        assert (group, "Stable") in [(g.group_id, g.group_state) for g in listed.groups]
        described = wire.request(DescribeGroupsRequest(groups=[group]), 5).groups[0]
        assert (described.group_state, described.protocol_data) == ("Stable", "range")
        assert [m.member_assignment for m in described.members] == [b"mine"]
        deleted = wire.request(DeleteGroupsRequest(groups_names=[group]), 2)
        assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        subscribed = wire.request(OffsetDeleteRequest(group_id=group, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name=topic, partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                    partition_index=0)])]), 0)
        assert subscribed.error_code == 0  # it subscribes to no topic

        left = wire.request(LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None)]), 4)
        assert [m.error_code for m in left.members] == [0]
        deleted = wire.request(DeleteGroupsRequest(groups_names=[group, group + "-x"]), 2)
        assert [r.error_code for r in deleted.results] == [0, ErrorCode.GROUP_ID_NOT_FOUND]


def test_offset_fetch_v8_answers_several_groups_and_keeps_commit_metadata(
    kafka_bootstrap: str,
) -> None:
    topic, group, unknown = create_topic(kafka_bootstrap, "wire"), _group(), _group()
    with WireClient(kafka_bootstrap) as wire:
        committed = wire.request(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            retention_time_ms=-1, topics=[Commit(name=topic, partitions=[CommitPartition(
                partition_index=2, committed_offset=42, committed_metadata="where I was")])],
        ), 2)
        assert committed.topics[0].partitions[0].error_code == 0
        fetched = wire.request(OffsetFetchRequest(groups=[
            FetchGroup(group_id=group, topics=None),
            FetchGroup(group_id=unknown, topics=[
                FetchGroup.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])]),
        ], require_stable=False), 8)
        old = wire.request(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[2])]), 1)

    known, missing = fetched.groups
    [partition] = known.topics[0].partitions
    assert (partition.partition_index, partition.committed_offset, partition.metadata) == (
        2, 42, "where I was")
    assert missing.topics[0].partitions[0].committed_offset == -1
    assert old.topics[0].partitions[0].metadata == "where I was"
