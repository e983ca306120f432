"""How quorum members reach each other and how they tell time.

A `RaftNode` sees the world through two narrow interfaces: a `Transport` that sends a
message on a best-effort basis (it may be lost, delayed or reordered, never corrupted) and a
`Scheduler` that runs a callback later. Production uses the asyncio loop (and, later, TCP);
tests use `SimulatedScheduler` and `InMemoryNetwork`, which make time, loss and partitions
deterministic under a seed.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from brokercore.clock import FakeClock

from .image import Record
from .raft_storage import Entry

# -- messages (Raft's RequestVote and AppendEntries, KIP-630's FetchSnapshot; offsets 0-based,
# -1 for "none") -------------------------------------------------------------------------


@dataclass(frozen=True)
class VoteRequest:
    """A vote, or with `pre_vote` a pre-vote (KIP-996): would you vote for me in `term`?
    A pre-vote changes nothing on either side, so asking cannot disrupt a healthy quorum."""

    term: int
    candidate_id: int
    last_log_offset: int
    last_log_term: int
    pre_vote: bool = False


@dataclass(frozen=True)
class VoteResponse:
    term: int
    voter_id: int
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True)
class AppendRequest:
    term: int
    leader_id: int
    prev_log_offset: int
    prev_log_term: int
    entries: tuple[Entry, ...]
    leader_commit: int


@dataclass(frozen=True)
class AppendResponse:
    term: int
    follower_id: int
    success: bool
    match_offset: int  # on success, the last offset known to match; otherwise a hint


@dataclass(frozen=True)
class FetchSnapshotRequest:
    """A follower behind the leader's log start asks for the snapshot `end_offset`/
    `snapshot_term` from record `position` on (Kafka's FetchSnapshot)."""

    term: int
    follower_id: int
    end_offset: int
    snapshot_term: int
    position: int


@dataclass(frozen=True)
class FetchSnapshotResponse:
    """Records `position`.. of the leader's latest snapshot (of `total`). Unasked, with no
    records, it is the leader's offer: a follower whose next offset the leader's log no
    longer holds starts (or resumes) fetching it."""

    term: int
    leader_id: int
    end_offset: int
    snapshot_term: int
    position: int
    records: tuple[Record, ...]
    total: int


Message = (VoteRequest | VoteResponse | AppendRequest | AppendResponse | FetchSnapshotRequest
           | FetchSnapshotResponse)
MessageHandler = Callable[[int, Message], None]  # (sender id, message)


class Transport(Protocol):
    def bind(self, handler: MessageHandler) -> None:
        """Deliver every message for this node to `handler`."""
        ...

    def send(self, to: int, message: Message) -> None:
        """Best effort: the message may be lost, delayed or reordered."""
        ...


# -- time -------------------------------------------------------------------------------


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...


class AsyncioScheduler:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()

    def now(self) -> float:
        return self._loop.time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return self._loop.call_later(delay, callback)


@dataclass(order=True)
class _Timer:
    when: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class SimulatedScheduler:
    """Discrete-event time on a `FakeClock`: callbacks run in due order, instantly."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock or FakeClock()
        self._queue: list[_Timer] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.clock.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _Timer(self.now() + max(delay, 0.0), next(self._seq), callback)
        heapq.heappush(self._queue, timer)
        return timer

    def run_for(self, seconds: float) -> None:
        self.run_until(lambda: False, seconds)

    def run_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Run due callbacks until `condition()` holds or `timeout` simulated seconds pass."""
        deadline = self.now() + timeout
        while not condition():
            while self._queue and self._queue[0].cancelled:
                heapq.heappop(self._queue)
            if not self._queue or self._queue[0].when > deadline:
                self.clock.advance(max(deadline - self.now(), 0.0))
                return condition()
            timer = heapq.heappop(self._queue)
            self.clock.advance(max(timer.when - self.now(), 0.0))
            timer.callback()
        return True


# -- an in-memory network for tests ------------------------------------------------------


class InMemoryNetwork:
    """Delivers messages through a scheduler with delay, loss, partitions and dead nodes."""

    def __init__(self, scheduler: SimulatedScheduler, rng: random.Random, *,
                 min_delay: float = 0.001, max_delay: float = 0.01,
                 loss: float = 0.0) -> None:
        self.scheduler = scheduler
        self.rng = rng
        self.min_delay, self.max_delay, self.loss = min_delay, max_delay, loss
        self.handlers: dict[int, MessageHandler] = {}
        self.down: set[int] = set()
        self._groups: list[set[int]] | None = None

    def transport(self, node_id: int) -> InMemoryTransport:
        return InMemoryTransport(self, node_id)

    def partition(self, *groups: set[int]) -> None:
        """Only nodes in the same group can talk; nodes in no group are isolated."""
        self._groups = [set(g) for g in groups]

    def heal(self) -> None:
        self._groups = None

    def can_reach(self, a: int, b: int) -> bool:
        if a in self.down or b in self.down:
            return False
        return self._groups is None or any(a in g and b in g for g in self._groups)

    def deliver(self, sender: int, to: int, message: Message) -> None:
        if not self.can_reach(sender, to) or self.rng.random() < self.loss:
            return
        delay = self.rng.uniform(self.min_delay, self.max_delay)

        def arrive() -> None:
            handler = self.handlers.get(to)
            if handler is not None and self.can_reach(sender, to):
                handler(sender, message)

        self.scheduler.call_later(delay, arrive)


class InMemoryTransport:
    def __init__(self, network: InMemoryNetwork, node_id: int) -> None:
        self.network = network
        self.node_id = node_id

    def bind(self, handler: MessageHandler) -> None:
        self.network.handlers[self.node_id] = handler

    def send(self, to: int, message: Message) -> None:
        self.network.deliver(self.node_id, to, message)
