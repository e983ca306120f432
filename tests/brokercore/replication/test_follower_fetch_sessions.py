"""Followers fetch through fetch sessions (KIP-227): an idle follower's fetch names no
partition, and a follower whose session the leader lost starts over with a full fetch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from brokercore.protocol.errors import ErrorCode
from brokercore.replication.fetch_session import FollowerFetchSession, PartitionFetch
from brokercore.topic_partition import TopicPartition
from tests.brokercore.wire import record_batch

from .harness import Client, Cluster, eventually

TOPIC = "sessions"
A, B, C = (TopicPartition(TOPIC, i) for i in range(3))


def at(offset: int) -> PartitionFetch:
    return PartitionFetch(offset, 0, 0, 1024)


def test_after_a_full_fetch_only_changes_and_forgotten_partitions_are_sent() -> None:
    session = FollowerFetchSession()
    full = session.build({A: at(0), B: at(0)})
    assert (full.session_id, full.epoch, set(full.to_send)) == (0, 0, {A, B})
    assert session.answered(ErrorCode.NONE, 42)

    idle = session.build({A: at(0), B: at(0)})
    assert (idle.session_id, idle.epoch, idle.to_send, idle.forgotten) == (42, 1, {}, [])
    assert session.answered(ErrorCode.NONE, 42)
    moved = session.build({A: at(5), C: at(0)})
    assert (moved.epoch, set(moved.to_send), moved.forgotten) == (2, {A, C}, [B])


def test_session_errors_send_the_next_fetch_in_full() -> None:
    session = FollowerFetchSession()
    session.build({A: at(0)})
    session.answered(ErrorCode.NONE, 42)
    session.build({A: at(0)})
    assert not session.answered(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    again = session.build({A: at(0)})
    assert (again.session_id, again.epoch, set(again.to_send)) == (42, 0, {A})  # closes 42
    assert not session.answered(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert session.build({A: at(0)}).session_id == 0
    # A leader without room answers in full with no session: stay full.
    assert session.answered(ErrorCode.NONE, 0)
    assert session.build({A: at(0)}).epoch == 0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    started = await Cluster(tmp_path, 3).start()
    yield started
    await started.stop()


async def test_followers_replicate_through_sessions_and_recover_a_lost_one(
    cluster: Cluster,
) -> None:
    await cluster.create_topic(TOPIC, [1, 2, 3], partitions=3)
    leader = cluster.nodes[1]
    cache = leader.server.parts.fetch_sessions
    client = await Client.to(leader)
    for index in range(3):
        assert (await client.produce(TOPIC, record_batch([b"a"]), index=index)).error_code == 0

    def follower_sessions() -> list[int]:
        return sorted(len(s.partitions) for s in cache.sessions.values() if s.privileged)

    await eventually(lambda: follower_sessions() == [3, 3], "a session per follower")
    cache.sessions.clear()  # as if evicted, or the leader restarted
    for index in range(3):
        assert (await client.produce(TOPIC, record_batch([b"b"]), index=index)).error_code == 0
    await eventually(lambda: follower_sessions() == [3, 3], "the followers open new sessions")
    for node_id in (2, 3):
        follower = cluster.nodes[node_id]
        assert [follower.partition(TOPIC, i).log_end_offset for i in range(3)] == [2, 2, 2]
    assert leader.partition(TOPIC).isr == [1, 2, 3]
    client.close()
