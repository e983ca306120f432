"""MirrorMaker's record formats and offset translation, without sockets: Hypothesis round
trips of the offset sync, checkpoint and heartbeat bytes, their layout field by field, and
the translation's promise (a group resumes at or before the first record it has not read,
never after it, however the syncs were thinned)."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from connect.connectors.mirror.formats import (
    Checkpoint,
    Heartbeat,
    IdentityReplicationPolicy,
    OffsetSync,
    ReplicationPolicy,
)
from connect.connectors.mirror.offsetsyncs import KEEP, SyncTable

names = st.text(min_size=0, max_size=40)
offsets = st.integers(min_value=-1, max_value=2**63 - 1)


@given(names, st.integers(0, 2**31 - 1), offsets, offsets)
def test_offset_syncs_round_trip(topic: str, partition: int, up: int, down: int) -> None:
    sync = OffsetSync(topic, partition, up, down)
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


@given(names, names, st.integers(0, 2**31 - 1), offsets, offsets, names)
def test_checkpoints_round_trip(group: str, topic: str, partition: int, up: int, down: int,
                                metadata: str) -> None:
    checkpoint = Checkpoint(group, topic, partition, up, down, metadata)
    assert Checkpoint.decode(checkpoint.key(), checkpoint.value()) == checkpoint


@given(names, names, offsets)
def test_heartbeats_round_trip(source: str, target: str, timestamp: int) -> None:
    beat = Heartbeat(source, target, timestamp)
    assert Heartbeat.decode(beat.key(), beat.value()) == beat


def test_the_bytes_are_kafkas_struct_layout() -> None:
    sync = OffsetSync("t", 2, 5, 7)
    assert sync.key() == b"\x00\x01t" + struct.pack(">i", 2)
    assert sync.value() == struct.pack(">qq", 5, 7)  # no version
    checkpoint = Checkpoint("g", "A.t", 1, 10, 9, "")
    assert checkpoint.key() == b"\x00\x01g\x00\x03A.t" + struct.pack(">i", 1)
    assert checkpoint.value() == struct.pack(">hqqh", 0, 10, 9, 0)  # version 0 first
    assert Heartbeat("A", "B", 3).value() == struct.pack(">hq", 0, 3)


def test_remote_topic_names_follow_the_replication_policy() -> None:
    policy = ReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A" and policy.topic_source("orders") is None
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    identity = IdentityReplicationPolicy()
    assert identity.format_remote_topic("A", "orders") == "orders"
    assert identity.format_remote_topic("A", "heartbeats") == "A.heartbeats"


@st.composite
def replicated_logs(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[int]]:
    """Where each upstream record landed downstream (gaps on both sides: compaction,
    transaction markers), and which of them got a sync, in order."""
    count = draw(st.integers(1, 400))
    up, down, u, d = [], [], draw(st.integers(0, 5)), draw(st.integers(0, 5))
    for _ in range(count):
        up.append(u)
        down.append(d)
        u += draw(st.integers(1, 3))
        d += draw(st.integers(1, 3))
    synced = sorted(draw(st.sets(st.integers(0, count - 1), min_size=1)))
    return list(zip(up, down, strict=True)), synced


@given(replicated_logs(), st.data())
def test_a_translated_offset_never_skips_a_record(log: tuple[list[tuple[int, int]], list[int]],
                                                  data: st.DataObject) -> None:
    records, synced = log
    table = SyncTable()
    for i in synced:
        table.add(OffsetSync("t", 0, *records[i]))
    assert len(table.syncs[("t", 0)]) <= KEEP
    committed = data.draw(st.integers(0, records[-1][0] + 5))  # the next offset to read
    translated = table.translate("t", 0, committed)
    unread = [d for u, d in records if u >= committed]
    if translated is None:  # behind every kept sync: no translation at all
        assert committed < table.syncs[("t", 0)][0][0]
        return
    # the first unread record is at or after where the group resumes
    assert not unread or translated <= unread[0]
    # and what it reads again lies after the newest sync at or before the committed offset
    newest = max((u, d) for u, d in table.syncs[("t", 0)] if u <= committed)
    assert translated in (newest[1], newest[1] + 1)
