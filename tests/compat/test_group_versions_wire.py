"""The classic group APIs at Kafka 4.0's versions (JoinGroup v9, LeaveGroup v5), on a raw
socket: no Python client sends them yet (librdkafka and the Java client do)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka.protocol.consumer import JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient

SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"  # v0, no topics, no user data


def find_coordinator(wire: WireClient, group: str) -> None:
    """As clients do: ask until the coordinator is there (the offsets topic is made on demand)."""
    deadline = time.monotonic() + 15
    while wire.request(FindCoordinatorRequest(key=group), 3).error_code != ErrorCode.NONE:
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.1)


def join(wire: WireClient, group: str, instance: str, member_id: str = "",
         version: int = 9) -> Any:
    joined = wire.request(JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        member_id=member_id, group_instance_id=instance, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                             metadata=SUBSCRIPTION)],
        reason="test: starting up"), version)
    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        return join(wire, group, instance, joined.member_id, version)
    return joined


def test_a_static_leader_rejoining_a_stable_group_is_told_to_skip_assignment(
    kafka_bootstrap: str,
) -> None:
    group = f"static-{uuid.uuid4().hex[:8]}"
    with WireClient(kafka_bootstrap) as wire:
        find_coordinator(wire, group)
        first = join(wire, group, "instance-1")
        assert first.error_code == ErrorCode.NONE
        assert first.leader == first.member_id and first.skip_assignment is False
        synced = wire.request(SyncGroupRequest(
            group_id=group, generation_id=first.generation_id, member_id=first.member_id,
            group_instance_id="instance-1", protocol_type="consumer", protocol_name="range",
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=first.member_id, assignment=b"mine")]), 5)
        assert synced.error_code == ErrorCode.NONE

        # The same instance restarts: no rebalance, a new member id, the members to watch.
        again = join(wire, group, "instance-1")
        assert again.error_code == ErrorCode.NONE
        assert again.member_id != first.member_id and again.leader == again.member_id
        assert again.generation_id == first.generation_id
        assert again.skip_assignment is True
        assert [(m.group_instance_id, bytes(m.metadata)) for m in again.members] == [
            ("instance-1", SUBSCRIPTION)]
        kept = wire.request(SyncGroupRequest(
            group_id=group, generation_id=again.generation_id, member_id=again.member_id,
            group_instance_id="instance-1", protocol_type="consumer", protocol_name="range",
            assignments=[]), 5)
        assert (kept.error_code, kept.assignment) == (ErrorCode.NONE, b"mine")

        left = wire.request(LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=again.member_id,
                                             group_instance_id="instance-1",
                                             reason="test: shutting down")]), 5)
        assert (left.error_code, [m.error_code for m in left.members]) == (0, [0])
