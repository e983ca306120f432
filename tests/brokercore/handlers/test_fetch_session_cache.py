"""The fetch session cache's bounds and evictions, driven by a fake clock, without sockets."""

from __future__ import annotations

import uuid

from brokercore.clock import FakeClock
from brokercore.handlers.fetch_sessions import (
    EVICTION_S,
    INVALID_SESSION_ID,
    FetchPosition,
    FetchSessionCache,
    SessionKey,
)
from brokercore.protocol.errors import ErrorCode


def positions(count: int, topic: str = "t") -> dict[SessionKey, FetchPosition]:
    return {(topic, i): FetchPosition(topic, uuid.UUID(int=0), i, 0, 1024) for i in range(count)}


def open_session(cache: FetchSessionCache, size: int, privileged: bool = False) -> int:
    return cache.create(privileged, False, positions(size))


def test_a_full_cache_refuses_a_session_no_more_valuable_than_its_least() -> None:
    cache = FetchSessionCache(max_slots=2, clock=FakeClock())
    first, second = open_session(cache, 5), open_session(cache, 3)
    assert open_session(cache, 3) == INVALID_SESSION_ID
    assert set(cache.sessions) == {first, second}


def test_a_bigger_session_takes_the_place_of_the_smallest() -> None:
    cache = FetchSessionCache(max_slots=2, clock=FakeClock())
    big, small = open_session(cache, 5), open_session(cache, 2)
    bigger = open_session(cache, 8)
    assert bigger != INVALID_SESSION_ID
    assert set(cache.sessions) == {big, bigger}
    assert small not in cache.sessions


def test_a_session_unused_for_two_minutes_is_evicted_first() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(max_slots=2, clock=clock)
    stale = open_session(cache, 50)
    clock.advance(EVICTION_S / 2)
    busy = open_session(cache, 50)
    clock.advance(EVICTION_S / 2 + 1)
    newcomer = open_session(cache, 1)
    assert set(cache.sessions) == {busy, newcomer}
    assert stale not in cache.sessions


def test_consumers_cannot_evict_young_follower_sessions_but_followers_evict_consumers() -> None:
    cache = FetchSessionCache(max_slots=1, clock=FakeClock())
    follower = open_session(cache, 1, privileged=True)
    assert open_session(cache, 100) == INVALID_SESSION_ID
    assert set(cache.sessions) == {follower}
    cache = FetchSessionCache(max_slots=1, clock=FakeClock())
    open_session(cache, 100)
    assert open_session(cache, 1, privileged=True) in cache.sessions


def test_the_epoch_moves_on_before_the_fetch_is_answered() -> None:
    cache = FetchSessionCache(clock=FakeClock())
    session = open_session(cache, 2)
    first = cache.context(session, 1, privileged=False, uses_topic_ids=False, requested={},
                          forgotten=[])
    # A second request with the same epoch, while the first still long-polls, is refused.
    second = cache.context(session, 1, privileged=False, uses_topic_ids=False, requested={},
                           forgotten=[])
    assert (first.error, second.error) == (ErrorCode.NONE, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert len(first.positions) == 2
