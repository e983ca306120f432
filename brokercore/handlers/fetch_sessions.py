"""Fetch sessions (KIP-227): the broker remembers what a fetcher reads, so it need not repeat it.

A fetcher opens a session with a full fetch at epoch 0; the answer names the session. Its
next fetches are incremental, with epochs 1, 2, ...: they carry only the partitions whose
fetch position changed (and, in `forgotten_topics_data`, those to drop), and the answer
carries only the partitions with something new: records, an error, or a changed high
watermark, last stable offset or log start offset. Epoch -1 is a full fetch without a
session (every fetch before v7, and our own followers); a full fetch naming a session
closes it.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions per broker.
When it is full, a new session takes the place of one unused for two minutes, else of the
least valuable one, if that is worth less than the newcomer: followers' sessions
(privileged) before consumers', then bigger sessions before smaller ones (Kafka's
FetchSessionCache). When nothing may be evicted, the fetch is answered in full without a
session (session id 0), and the fetcher simply keeps sending full fetches.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from brokercore.clock import Clock, SystemClock
from brokercore.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # open (or reopen) a session with this full fetch
FINAL_EPOCH = -1  # a full fetch that leaves no session behind
MAX_EPOCH = 2**31 - 1
EVICTION_S = 120.0  # Kafka's minimum age of an unused session before it is evicted
DEFAULT_SLOTS = 1000  # max.incremental.fetch.session.cache.slots

# A partition in a session, in the client's terms: (topic name, index) before Fetch v13,
# (topic id as text, index) from v13 on.
SessionKey = tuple[str, int]


@dataclass
class FetchPosition:
    """One partition of a fetch, as the request last said: where and how much to read."""

    topic: str  # the name before v13; from v13 on, resolved from `topic_id` at each read
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    # What the session last answered for it: an incremental answer leaves it out while
    # none of these change and it brings no records and no error.
    sent_high_watermark: int = -1
    sent_last_stable_offset: int = -1
    sent_log_start_offset: int = -1

    def update_from(self, request: FetchPosition) -> None:
        self.fetch_offset = request.fetch_offset
        self.partition_max_bytes = request.partition_max_bytes
        self.current_leader_epoch = request.current_leader_epoch
        self.last_fetched_epoch = request.last_fetched_epoch
        self.log_start_offset = request.log_start_offset


@dataclass(frozen=True)
class PartitionAnswer:
    """What a fetch found for one partition, as far as the session must know."""

    key: SessionKey
    has_news: bool  # records, an error, a diverging epoch: always answered
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


@dataclass
class FetchSession:
    session_id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool
    created: float
    last_used: float
    epoch: int = 1  # the epoch the next incremental fetch must carry
    partitions: dict[SessionKey, FetchPosition] = field(default_factory=dict)

    def rank(self) -> tuple[bool, int]:
        """The less, the sooner evicted."""
        return self.privileged, len(self.partitions)


class FetchContext:
    """One fetch request's view of its session: what to read, then what to answer."""

    def __init__(self, cache: FetchSessionCache, error: ErrorCode,
                 positions: dict[SessionKey, FetchPosition], session: FetchSession | None,
                 open_session: bool = False, privileged: bool = False,
                 uses_topic_ids: bool = False) -> None:
        self.cache = cache
        self.error = error
        self.positions = positions
        self.session = session  # set for an incremental fetch
        self._open = open_session
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    def answer(self, found: list[PartitionAnswer]) -> tuple[int, set[SessionKey]]:
        """The session id to answer with, and the partitions the answer carries."""
        if self.session is None:
            session_id = INVALID_SESSION_ID
            if self._open:
                for a in found:
                    _remember(self.positions[a.key], a)
                session_id = self.cache.create(self._privileged, self._uses_topic_ids,
                                               self.positions)
            return session_id, {a.key for a in found}
        included = set()
        for a in found:
            position = self.session.partitions.get(a.key)
            if position is None:
                continue
            changed = (a.high_watermark, a.last_stable_offset, a.log_start_offset) != (
                position.sent_high_watermark, position.sent_last_stable_offset,
                position.sent_log_start_offset)
            if a.has_news or changed:
                _remember(position, a)
                included.add(a.key)
                # Kafka's fairness: a partition just answered goes to the back of the line.
                self.session.partitions[a.key] = self.session.partitions.pop(a.key)
        return self.session.session_id, included


def _remember(position: FetchPosition, a: PartitionAnswer) -> None:
    position.sent_high_watermark = a.high_watermark
    position.sent_last_stable_offset = a.last_stable_offset
    position.sent_log_start_offset = a.log_start_offset


class FetchSessionCache:
    """This broker's fetch sessions, owned by its event loop (no locks)."""

    def __init__(self, max_slots: int = DEFAULT_SLOTS, clock: Clock | None = None) -> None:
        self.max_slots = max_slots
        self.clock: Clock = clock or SystemClock()
        self.sessions: dict[int, FetchSession] = {}
        self._random = random.Random()

    def context(
        self, session_id: int, epoch: int, *, privileged: bool, uses_topic_ids: bool,
        requested: dict[SessionKey, FetchPosition], forgotten: Iterable[SessionKey],
    ) -> FetchContext:
        """Decide what a fetch request means for its session (Kafka's FetchManager)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            return FetchContext(self, ErrorCode.NONE, requested, None,
                                open_session=epoch == INITIAL_EPOCH and bool(requested),
                                privileged=privileged, uses_topic_ids=uses_topic_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(self, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, {}, None)
        if session.uses_topic_ids != uses_topic_ids:
            # Names and topic ids cannot be told apart in one session (KIP-516).
            return FetchContext(self, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, {}, None)
        if epoch != session.epoch:
            return FetchContext(self, ErrorCode.INVALID_FETCH_SESSION_EPOCH, {}, None)
        for key, position in requested.items():
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = position
            else:
                cached.update_from(position)
        for key in forgotten:
            session.partitions.pop(key, None)
        # The epoch moves on now: a second request with the same epoch is refused even
        # while this one is still long-polling.
        session.epoch = 1 if session.epoch == MAX_EPOCH else session.epoch + 1
        session.last_used = self.clock.monotonic()
        return FetchContext(self, ErrorCode.NONE, dict(session.partitions), session)

    def create(self, privileged: bool, uses_topic_ids: bool,
               partitions: dict[SessionKey, FetchPosition]) -> int:
        """A new session holding `partitions`, or INVALID_SESSION_ID if there is no room."""
        now = self.clock.monotonic()
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, now, now,
                               partitions=dict(partitions))
        if len(self.sessions) >= self.max_slots and not self._evict_for(session, now):
            return INVALID_SESSION_ID
        self.sessions[session.session_id] = session
        return session.session_id

    def _evict_for(self, newcomer: FetchSession, now: float) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: s.last_used)
        if now - stale.last_used > EVICTION_S:
            del self.sessions[stale.session_id]
            return True
        # A young follower session is safe from consumers (it would only come back).
        evictable = [
            s for s in self.sessions.values()
            if newcomer.privileged or not s.privileged or now - s.created > EVICTION_S
        ]
        if not evictable:
            return False
        victim = min(evictable, key=lambda s: (*s.rank(), s.last_used))
        if newcomer.rank() <= victim.rank():
            return False
        del self.sessions[victim.session_id]
        return True

    def _new_id(self) -> int:
        while True:
            session_id = self._random.randint(1, 2**31 - 1)
            if session_id not in self.sessions:
                return session_id
