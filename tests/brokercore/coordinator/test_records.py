"""The `__consumer_offsets` record layout and the coordinator's partition choice."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brokercore.coordinator.records import (
    GroupRecord,
    MemberRecord,
    build_batch,
    decode_record,
    group_key,
    group_value,
    offset_key,
    offset_value,
    partition_for,
    read_batches,
)
from brokercore.coordinator.state import OffsetAndMetadata
from brokercore.topic_partition import TopicPartition

names = st.text(min_size=0, max_size=30)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


def test_partition_is_javas_string_hash_made_non_negative() -> None:
    assert partition_for("", 50) == 0
    assert partition_for("a", 50) == 97 % 50
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE


@given(names, names, i32, i64, i32, st.one_of(st.none(), names), i64)
def test_offset_commits_round_trip(group: str, topic: str, partition: int, offset: int,
                                   epoch: int, metadata: str | None, ts: int) -> None:
    tp = TopicPartition(topic, partition)
    om = OffsetAndMetadata(offset, epoch, metadata or "", ts)
    record = decode_record(offset_key(group, tp), offset_value(om))
    assert record is not None
    assert (record.group_id, record.tp, record.offset) == (group, tp, om)


members = st.builds(MemberRecord, names, st.one_of(st.none(), names), names, names, i32, i32,
                    st.binary(max_size=40), st.binary(max_size=40))


@given(names, names, i32, st.one_of(st.none(), names), st.one_of(st.none(), names), i64,
       st.lists(members, max_size=4).map(tuple))
def test_group_metadata_round_trips(group: str, protocol_type: str, generation: int,
                                    protocol: str | None, leader: str | None, ts: int,
                                    member_list: tuple[MemberRecord, ...]) -> None:
    stored = GroupRecord(protocol_type, generation, protocol, leader, ts, member_list)
    record = decode_record(group_key(group), group_value(stored))
    assert record is not None
    assert (record.group_id, record.tp, record.group) == (group, None, stored)


def test_batches_carry_tombstones_as_null_values() -> None:
    tp = TopicPartition("t", 1)
    batch = build_batch([(offset_key("g", tp), None), (group_key("g"), None)], 1000)
    [(next_offset, records, _, _, _)] = list(read_batches(batch))
    assert next_offset == 2
    decoded = [decode_record(k, v) for k, v in records]
    assert all(r is not None and r.is_tombstone for r in decoded)
