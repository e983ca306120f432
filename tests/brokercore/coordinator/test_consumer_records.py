"""KIP-848 records of `__consumer_offsets`: Kafka's layout, round trips and tombstones."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from brokercore.coordinator import consumer_records as cr
from brokercore.coordinator.consumer_group import Assignment, ClassicMemberMetadata, MemberState
from brokercore.coordinator.reconciliation import MemberAssignment
from brokercore.coordinator.records import decode_record

names = st.text(max_size=20)
maybe = st.one_of(st.none(), names)
i32 = st.integers(-(2**31), 2**31 - 1)
assignments: st.SearchStrategy[Assignment] = st.dictionaries(
    st.uuids().map(str), st.frozensets(st.integers(0, 2**31 - 1), min_size=1, max_size=5),
    max_size=3)


def _decoded(key: bytes, value: bytes | None) -> cr.ConsumerRecord:
    record = decode_record(key, value)
    assert record is not None and record.consumer is not None
    return record.consumer


@given(names, names, maybe, maybe, names, names, st.lists(names, max_size=4), maybe, i32, maybe)
def test_member_metadata_round_trips(group: str, member: str, instance: str | None,
                                     rack: str | None, client: str, host: str,
                                     topics: list[str], regex: str | None, timeout: int,
                                     assignor: str | None) -> None:
    value = cr.MemberMetadata(instance, rack, client, host, tuple(topics), regex, timeout,
                              assignor)
    record = _decoded(cr.key(cr.MEMBER_METADATA_KEY, group, member), cr.member_value(value))
    assert (record.group_id, record.member_id, record.value) == (group, member, value)


@given(names, names, i32, i32, st.sampled_from(list(MemberState)), assignments, assignments)
def test_current_assignments_round_trip(group: str, member: str, epoch: int, previous: int,
                                        state: MemberState, assigned: Assignment,
                                        pending: Assignment) -> None:
    value = MemberAssignment(epoch, previous, state, assigned, pending)
    record = _decoded(cr.key(cr.CURRENT_ASSIGNMENT_KEY, group, member), cr.current_value(value))
    assert record.value == value


@given(names, names, assignments, i32)
def test_targets_and_epochs_round_trip(group: str, member: str, target: Assignment,
                                       epoch: int) -> None:
    assert _decoded(cr.key(cr.TARGET_MEMBER_KEY, group, member),
                    cr.target_value(target)).value == target
    for version in (cr.GROUP_EPOCH_KEY, cr.TARGET_EPOCH_KEY):
        record = _decoded(cr.key(version, group), cr.epoch_value(epoch))
        assert (record.key_version, record.member_id, record.value) == (version, None, epoch)


def test_the_layout_is_kafkas() -> None:
    topic = uuid.UUID(int=1)
    # key: int16 version, int16-length strings; value: int16 version 0, then flexible fields.
    assert cr.key(cr.CURRENT_ASSIGNMENT_KEY, "g", "m") == b"\x00\x08\x00\x01g\x00\x01m"
    value = cr.current_value(MemberAssignment(3, 2, MemberState.UNREVOKED_PARTITIONS,
                                              {str(topic): frozenset({0})}, {}))
    assert value == (b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x02" + b"\x01"
                     + b"\x02" + topic.bytes + b"\x02" + b"\x00\x00\x00\x00" + b"\x00"
                     + b"\x01" + b"\x00")
    assert cr.epoch_value(5) == b"\x00\x00\x00\x00\x00\x05\x00"


def test_tombstones_and_key_4_decode() -> None:
    tombstone = _decoded(cr.key(cr.MEMBER_METADATA_KEY, "g", "m"), None)
    assert (tombstone.key_version, tombstone.value) == (cr.MEMBER_METADATA_KEY, None)
    empty = _decoded(cr.key(4, "g"), b"\x00\x00\x01\x00")
    assert empty.value == cr.SubscriptionMetadata({})
    topics = {"t": (str(uuid.UUID(int=3)), 6), "u": (str(uuid.UUID(int=4)), 1)}
    written = _decoded(cr.key(cr.SUBSCRIPTION_METADATA_KEY, "g"),
                       cr.subscription_metadata_value(topics))
    assert written.value == cr.SubscriptionMetadata(topics)


def test_a_classic_members_metadata_travels_in_tag_0_of_its_member_record() -> None:
    classic = ClassicMemberMetadata(45_000, (("range", b"\x00\x01sub"), ("roundrobin", b"")))
    metadata = cr.MemberMetadata("i", None, "client", "/127.0.0.1", ("t",), None, 30_000,
                                 None, classic)
    decoded = _decoded(cr.key(cr.MEMBER_METADATA_KEY, "g", "m"), cr.member_value(metadata))
    assert decoded.value == metadata
    plain = cr.MemberMetadata("i", None, "client", "/127.0.0.1", ("t",), None, 30_000, None)
    assert cr.member_value(plain).endswith(b"\x00")  # no tagged fields at all
    assert _decoded(cr.key(cr.MEMBER_METADATA_KEY, "g", "m"), cr.member_value(plain)).value \
        == plain
