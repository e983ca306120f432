"""KIP-848 APIs on a raw socket: both versions of the new APIs, and the group APIs that now
know consumer groups (ListGroups v5, DescribeGroups, OffsetCommit/OffsetFetch v9)."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from brokercore.protocol.errors import ErrorCode
from brokercore.protocol.kip848_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from tests.brokercore.wire import WireClient
from tests.compat.groups import PARTITIONS, create_topic

Commit = OffsetCommitRequest.OffsetCommitRequestTopic
FetchGroup = OffsetFetchRequest.OffsetFetchRequestGroup


def _heartbeat(wire: WireClient, version: int, **fields: Any) -> Any:
    return wire.request(ConsumerGroupHeartbeatRequest(**fields), version)


def _joined(wire: WireClient, topic: str, version: int = 1) -> tuple[str, Any]:
    group = f"wire848-{uuid.uuid4().hex[:8]}"
    wire.request(FindCoordinatorRequest(key=group), 0)  # creates __consumer_offsets
    member_id = "" if version == 0 else uuid.uuid4().hex
    return group, _heartbeat(wire, version, group_id=group, member_id=member_id,
                             member_epoch=0, rebalance_timeout_ms=30_000,
                             subscribed_topic_names=[topic], topic_partitions=[])


def _topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_topics(TopicCollection([topic])).values()
    return uuid.UUID(bytes=bytes.fromhex(_hex(future.result(10).topic_id)))


def _hex(topic_id: Any) -> str:
    """confluent-kafka's Uuid as 32 hex digits (its str() is base64)."""
    msb, lsb = topic_id.get_most_significant_bits(), topic_id.get_least_significant_bits()
    return f"{msb & (2**64 - 1):016x}{lsb & (2**64 - 1):016x}"


def test_a_v0_member_is_given_an_id_and_every_partition(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, "wire848")
    with WireClient(kafka_bootstrap) as wire:
        group, joined = _joined(wire, topic, version=0)
        left = _heartbeat(wire, 0, group_id=group, member_id=joined.member_id, member_epoch=-1)
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.NONE, 1)
    assert joined.member_id and joined.heartbeat_interval_ms == 5000
    [assigned] = joined.assignment.topic_partitions
    assert assigned.topic_id == _topic_id(kafka_bootstrap, topic)
    assert sorted(assigned.partitions) == list(range(PARTITIONS))
    assert (left.error_code, left.member_epoch) == (ErrorCode.NONE, -1)


def test_heartbeat_errors_are_the_protocols(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, "wire848-errors")
    with WireClient(kafka_bootstrap) as wire:
        group, joined = _joined(wire, topic)
        fenced = _heartbeat(wire, 1, group_id=group, member_id=joined.member_id,
                            member_epoch=5)
        unknown = _heartbeat(wire, 1, group_id=group, member_id="nobody", member_epoch=1)
        no_timeout = _heartbeat(wire, 1, group_id=group, member_id="x", member_epoch=0,
                                subscribed_topic_names=[topic])
        regex = _heartbeat(wire, 1, group_id=group, member_id="y", member_epoch=0,
                           rebalance_timeout_ms=1000, subscribed_topic_regex="[")
    assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert no_timeout.error_code == ErrorCode.INVALID_REQUEST
    assert "RebalanceTimeoutMs" in no_timeout.error_message
    assert regex.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_consumer_group_describe_shows_epochs_members_and_assignments(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, "wire848-describe")
    with WireClient(kafka_bootstrap) as wire:
        group, joined = _joined(wire, topic)
        v0, v1 = (wire.request(ConsumerGroupDescribeRequest(
            group_ids=[group, "no-such-group"], include_authorized_operations=True), v)
            for v in (0, 1))
    described, missing = v1.groups
    assert (described.group_state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == ("Stable", 1, 1, "uniform")
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.member_type) == (
        joined.member_id, 1, 1)
    assert member.subscribed_topic_names == [topic]
    [tps] = member.assignment.topic_partitions
    assert (tps.topic_name, sorted(tps.partitions)) == (topic, list(range(PARTITIONS)))
    target = member.target_assignment.topic_partitions
    assert [(t.topic_name, sorted(t.partitions)) for t in target] == [
        (topic, list(range(PARTITIONS)))]
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert v0.groups[0].members[0].member_id == joined.member_id


def test_list_and_describe_groups_show_a_consumer_group_as_kafka_4_does(
    kafka_bootstrap: str,
) -> None:
    topic = create_topic(kafka_bootstrap, "wire848-list")
    with WireClient(kafka_bootstrap) as wire:
        group, _ = _joined(wire, topic)
        typed = wire.request(ListGroupsRequest(types_filter=["consumer"]), 5)
        classic_only = wire.request(ListGroupsRequest(types_filter=["classic"]), 5)
        v4 = wire.request(ListGroupsRequest(states_filter=["stable"]), 4)
        described = wire.request(DescribeGroupsRequest(groups=[group]), 5)
    listed = {g.group_id: (g.group_type, g.protocol_type, g.group_state) for g in typed.groups}
    assert listed[group] == ("consumer", "consumer", "Stable")
    assert group not in {g.group_id for g in classic_only.groups}
    assert group in {g.group_id for g in v4.groups}
    [dead] = described.groups
    assert (dead.error_code, dead.group_state) == (ErrorCode.NONE, "Dead")


def test_offset_commit_and_fetch_v9_check_the_member_epoch(kafka_bootstrap: str) -> None:
    topic = create_topic(kafka_bootstrap, "wire848-offsets")
    with WireClient(kafka_bootstrap) as wire:
        group, joined = _joined(wire, topic)

        def commit(epoch: int, member_id: str, offset: int) -> int:
            response = wire.request(OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
                group_instance_id=None, topics=[Commit(name=topic, partitions=[
                    Commit.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                        committed_metadata="")])]), 9)
            return int(response.topics[0].partitions[0].error_code)

        def fetch(member_id: str | None, epoch: int) -> Any:
            response = wire.request(OffsetFetchRequest(groups=[FetchGroup(
                group_id=group, member_id=member_id, member_epoch=epoch,
                topics=[FetchGroup.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
            )], require_stable=False), 9)
            return response.groups[0]

        assert commit(1, joined.member_id, 7) == ErrorCode.NONE
        assert commit(0, joined.member_id, 8) == ErrorCode.STALE_MEMBER_EPOCH
        assert commit(-1, "", 8) == ErrorCode.UNKNOWN_MEMBER_ID  # not while it has members
        own, admin = fetch(joined.member_id, 1), fetch(None, -1)
        stale = fetch(joined.member_id, 3)
    assert [p.committed_offset for t in own.topics for p in t.partitions] == [7]
    assert [p.committed_offset for t in admin.topics for p in t.partitions] == [7]
    assert stale.error_code == ErrorCode.STALE_MEMBER_EPOCH
