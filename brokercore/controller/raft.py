"""A Raft quorum member that replicates the metadata log (the quorum under KRaft's controller).

One `RaftNode` per controller. It is driven entirely by callbacks from its `Scheduler`
(timeouts) and `Transport` (messages), runs on one thread (the asyncio loop), and never
blocks except to fsync its storage. Offsets are 0-based, as in Kafka's metadata log.

Roles move FOLLOWER → PROSPECTIVE (election timeout) → CANDIDATE (a majority of pre-votes)
→ LEADER (a majority of votes), and any role → FOLLOWER on seeing a higher term or the
leader of its own. A prospective node asks for pre-votes (KIP-996) without bumping its term,
and a voter that has heard from a leader within an election timeout refuses them: a node
that was paused or cut off cannot depose a healthy leader when it comes back. A leader that
has not heard from a majority within an election timeout steps down, so a leader cut off
from the quorum stops taking proposals.
Each new leader first appends a control entry; committing it commits every earlier entry
(Raft §5.4.2: a leader only counts replicas for entries of its own term).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from .image import Record
from .raft_snapshots import Snapshot, SnapshotDownload
from .raft_storage import Entry, RaftStorage, log_end_offset, term_at
from .raft_transport import (
    AppendRequest,
    AppendResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Scheduler,
    TimerHandle,
    Transport,
    VoteRequest,
    VoteResponse,
)

log = logging.getLogger(__name__)

ApplyHook = Callable[[int, Record], None]  # (offset, record), committed and in order
RestoreHook = Callable[[Snapshot], None]  # the state machine becomes the snapshot's image
RoleHook = Callable[["Role", "int | None"], None]  # (new role, known leader)


class Role(enum.Enum):
    FOLLOWER = "follower"
    PROSPECTIVE = "prospective"  # asking for pre-votes, term unchanged
    CANDIDATE = "candidate"
    LEADER = "leader"


class NotLeaderError(Exception):
    """This node cannot take the proposal; `leader_id` is the leader it knows, if any."""

    def __init__(self, leader_id: int | None, term: int, message: str = "not the leader") -> None:
        super().__init__(f"{message} (term {term}, known leader {leader_id})")
        self.leader_id = leader_id
        self.term = term


@dataclass(frozen=True)
class RaftConfig:
    election_timeout: float = 1.0  # a follower waits between 1 and 2 times this
    heartbeat_interval: float = 0.1
    max_entries_per_append: int = 256
    snapshot_chunk_records: int = 2000  # records per FetchSnapshot answer


class RaftNode:
    def __init__(
        self, node_id: int, voters: set[int], storage: RaftStorage, transport: Transport,
        scheduler: Scheduler, *, apply: ApplyHook | None = None,
        restore: RestoreHook | None = None, config: RaftConfig | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if node_id not in voters:
            raise ValueError(f"node {node_id} is not one of the voters {sorted(voters)}")
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.storage = storage
        self.transport = transport
        self.scheduler = scheduler
        self.apply_hook = apply
        self.restore_hook = restore
        self.config = config or RaftConfig()
        self.rng = rng or random.Random()
        self.role = Role.FOLLOWER
        self.leader_id: int | None = None
        self.commit_offset = -1  # highest offset known committed
        self.applied_offset = -1
        # The commit offset of the current leader as last heard (our own, as leader, once
        # this term's control entry commits): applied past it, our state is caught up.
        self.leader_commit_offset = -1
        self.on_role_change: RoleHook | None = None
        self.on_applied: Callable[[int], None] | None = None
        self._votes: set[int] = set()
        self._leader_heard = float("-inf")  # when the leader of our term last reached us
        self._next_offset: dict[int, int] = {}
        self._match_offset: dict[int, int] = {}
        self._last_ack: dict[int, float] = {}
        self._snapshot_asked: dict[int, float] = {}  # leader: a voter's last FetchSnapshot
        self._download: SnapshotDownload | None = None  # follower: the one being fetched
        self._waiters: list[tuple[int, asyncio.Future[int]]] = []
        self._timer: TimerHandle | None = None
        self._stopped = False
        self._retired = False
        transport.bind(self._receive)
        if storage.snapshot is not None:
            self._restore(storage.snapshot)
        if self.voters == {node_id}:
            self._start_election()  # nobody else to hear from: lead at once
        else:
            self._reset_election_timer()

    # -- public API -------------------------------------------------------------------------
    @property
    def term(self) -> int:
        return self.storage.term

    @property
    def log(self) -> list[Entry]:
        return self.storage.entries

    @property
    def log_start_offset(self) -> int:
        """The first offset the log holds; those before it are in a snapshot."""
        return self.storage.start_offset

    @property
    def end_offset(self) -> int:
        return log_end_offset(self.storage)

    def entry_at(self, offset: int) -> Entry:
        return self.storage.entries[offset - self.storage.start_offset]

    def term_at(self, offset: int) -> int | None:
        """The term of the entry at `offset`; None past the log, or if a snapshot took its
        place (it is committed, and so agrees with every other log that holds it)."""
        return 0 if offset < 0 else term_at(self.storage, offset)

    def _last_term(self) -> int:
        return self.term_at(self.end_offset - 1) or 0

    @property
    def caught_up(self) -> bool:
        """A leader is known and this node has applied what that leader had committed."""
        return self.leader_id is not None and self.applied_offset >= self.leader_commit_offset

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def follower_progress(self) -> dict[int, tuple[int, float]]:
        """On the leader, each other voter's log end offset and when it last answered
        (scheduler time); empty elsewhere. Read by DescribeQuorum."""
        if self.role is not Role.LEADER:
            return {}
        return {v: (self._match_offset[v] + 1, self._last_ack[v]) for v in self._match_offset}

    def append_nowait(self, records: list[Record]) -> int:
        """Append `records` to the leader's log; the offset of the first (not yet committed)."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.leader_id, self.term)
        first = self.end_offset
        self._append_local([Entry(self.term, r) for r in records])
        return first

    async def propose(self, records: list[Record]) -> int:
        """Append `records` and wait until they commit; the offset of the first one.

        NotLeaderError if this node is not the leader, or loses leadership first (the
        records may then still be committed by a later leader, or be lost).
        """
        first = self.append_nowait(records)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((first + len(records) - 1, future))
        self._resolve_waiters()
        await future
        return first

    def take_snapshot(self, records: list[Record]) -> Snapshot | None:
        """Keep `records`, the state machine's image after `applied_offset`, as a snapshot;
        the log before the previous snapshot goes. None if the latest is already there."""
        end = self.applied_offset + 1
        latest = self.storage.snapshot
        if end <= (latest.end_offset if latest is not None else 0):
            return None
        term = self.term_at(end - 1)
        assert term is not None, "the applied offset is always in the log"
        snapshot = Snapshot(end, term, tuple(records))
        self.storage.save_snapshot(snapshot)
        log.info("node %d: metadata snapshot at offset %d; log starts at %d", self.node_id,
                 end, self.log_start_offset)
        return snapshot

    def stop(self) -> None:
        """Stop taking part (a crash, as far as the quorum can tell)."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        self._fail_waiters("node stopped")

    def retire(self) -> None:
        """Never stand for election again (a node shutting down): a leader keeps leading
        until it stops, a follower keeps voting for others, but this node no longer starts
        elections that could keep it, or the quorum, waiting on its way out."""
        self._retired = True

    # -- timers ---------------------------------------------------------------------------
    def _set_timer(self, delay: float, callback: Callable[[], None]) -> None:
        if self._timer is not None:
            self._timer.cancel()

        def fire() -> None:
            if not self._stopped:
                callback()

        self._timer = self.scheduler.call_later(delay, fire)

    def _reset_election_timer(self) -> None:
        timeout = self.config.election_timeout * (1 + self.rng.random())
        self._set_timer(timeout, self._start_pre_vote)

    # -- elections ------------------------------------------------------------------------
    def _start_pre_vote(self) -> None:
        """Ask whether the others would elect us in the next term; bump it only if a
        majority would. Every failed round is retried at the next timeout."""
        if self._retired:
            return
        self._set_role(Role.PROSPECTIVE, None)
        self._votes = {self.node_id}
        request = VoteRequest(self.term + 1, self.node_id, self.end_offset - 1,
                              self._last_term(), pre_vote=True)
        for voter in self.voters - {self.node_id}:
            self.transport.send(voter, request)
        self._reset_election_timer()
        self._count_votes()

    def _start_election(self) -> None:
        if self._retired:
            return
        self._set_role(Role.CANDIDATE, None)
        self.storage.save_vote(self.term + 1, self.node_id)
        self._votes = {self.node_id}
        log.info("node %d standing for election in term %d", self.node_id, self.term)
        request = VoteRequest(self.term, self.node_id, self.end_offset - 1, self._last_term())
        for voter in self.voters - {self.node_id}:
            self.transport.send(voter, request)
        self._reset_election_timer()
        self._count_votes()

    def _on_vote_request(self, sender: int, req: VoteRequest) -> None:
        up_to_date = ((req.last_log_term, req.last_log_offset)
                      >= (self._last_term(), self.end_offset - 1))
        if req.pre_vote:  # answered from our state, which it leaves as it is
            granted = req.term >= self.term and up_to_date and not self._leader_alive()
            self.transport.send(sender, VoteResponse(self.term, self.node_id, granted, True))
            return
        granted = (req.term == self.term and up_to_date
                   and self.storage.voted_for in (None, req.candidate_id))
        if granted:
            if self.storage.voted_for is None:
                self.storage.save_vote(self.term, req.candidate_id)
            self._reset_election_timer()
        self.transport.send(sender, VoteResponse(self.term, self.node_id, granted))

    def _leader_alive(self) -> bool:
        """We lead, or the leader of our term reached us within an election timeout."""
        if self.role is Role.LEADER:
            return True
        recent = self.scheduler.now() - self._leader_heard < self.config.election_timeout
        return self.leader_id is not None and recent

    def _on_vote_response(self, resp: VoteResponse) -> None:
        if not resp.granted:
            return
        if resp.pre_vote:
            counts = self.role is Role.PROSPECTIVE and resp.term <= self.term + 1
        else:
            counts = self.role is Role.CANDIDATE and resp.term == self.term
        if counts:
            self._votes.add(resp.voter_id)
            self._count_votes()

    def _count_votes(self) -> None:
        if len(self._votes & self.voters) < self.majority:
            return
        if self.role is Role.PROSPECTIVE:
            self._start_election()
        elif self.role is Role.CANDIDATE:
            self._become_leader()

    def _become_leader(self) -> None:
        self._set_role(Role.LEADER, self.node_id)
        log.info("node %d is the leader of term %d", self.node_id, self.term)
        now = self.scheduler.now()
        for voter in self.voters - {self.node_id}:
            self._next_offset[voter] = self.end_offset
            self._match_offset[voter] = -1
            self._last_ack[voter] = now
        marker = {"type": "leader_change", "leader_id": self.node_id, "term": self.term}
        self.leader_commit_offset = self.end_offset
        self._append_local([Entry(self.term, marker, control=True)])
        self._heartbeat()

    def _set_role(self, role: Role, leader_id: int | None) -> None:
        if self.role is Role.LEADER and role is not Role.LEADER:
            self._fail_waiters("leadership lost")
        changed = (role, leader_id) != (self.role, self.leader_id)
        self.role = role
        self.leader_id = leader_id
        if changed and self.on_role_change is not None:
            self.on_role_change(role, leader_id)

    # -- replication (leader) -------------------------------------------------------------
    def _append_local(self, entries: list[Entry]) -> None:
        self.storage.append(entries)
        self._advance_commit()
        for voter in self.voters - {self.node_id}:
            self._send_append(voter)

    def _heartbeat(self) -> None:
        if self.role is not Role.LEADER:
            return
        now = self.scheduler.now()
        recent = sum(1 for v in self._last_ack.values()
                     if now - v < self.config.election_timeout)
        if recent + 1 < self.majority:
            log.warning("node %d lost contact with the quorum; stepping down in term %d",
                        self.node_id, self.term)
            self._set_role(Role.FOLLOWER, None)
            self._reset_election_timer()
            return
        for voter in self.voters - {self.node_id}:
            self._send_append(voter)
        self._set_timer(self.config.heartbeat_interval, self._heartbeat)

    def _send_append(self, voter: int) -> None:
        next_offset = self._next_offset[voter]
        if next_offset < self.log_start_offset:
            self._offer_snapshot(voter)
            return
        prev = next_offset - 1
        first = next_offset - self.log_start_offset
        entries = self.log[first:first + self.config.max_entries_per_append]
        self.transport.send(voter, AppendRequest(
            self.term, self.node_id, prev, self.term_at(prev) or 0, tuple(entries),
            self.commit_offset))

    def _on_append_response(self, resp: AppendResponse) -> None:
        if self.role is not Role.LEADER or resp.term != self.term:
            return
        voter = resp.follower_id
        self._last_ack[voter] = self.scheduler.now()
        if resp.success:
            if resp.match_offset > self._match_offset[voter]:
                self._match_offset[voter] = resp.match_offset
                self._next_offset[voter] = resp.match_offset + 1
                self._advance_commit()
            if self._next_offset[voter] < self.end_offset:
                self._send_append(voter)
        else:
            if resp.match_offset < self._match_offset[voter]:  # it lost entries (a new disk)
                self._match_offset[voter] = resp.match_offset
            # Back off to the follower's end (its hint), never past what is known to match.
            hint = min(self._next_offset[voter] - 1, resp.match_offset + 1)
            self._next_offset[voter] = max(hint, self._match_offset[voter] + 1, 0)
            self._send_append(voter)

    def _advance_commit(self) -> None:
        if self.role is not Role.LEADER:
            return
        matches = sorted([self.end_offset - 1, *self._match_offset.values()], reverse=True)
        candidate = matches[self.majority - 1]
        if candidate > self.commit_offset and self.term_at(candidate) == self.term:
            self.commit_offset = candidate
            self._apply_committed()

    # -- replication (follower) -----------------------------------------------------------
    def _on_append_request(self, sender: int, req: AppendRequest) -> None:
        if req.term < self.term:
            self.transport.send(sender, AppendResponse(self.term, self.node_id, False, -1))
            return
        self._set_role(Role.FOLLOWER, req.leader_id)
        self._leader_heard = self.scheduler.now()
        self._reset_election_timer()
        known = self.term_at(req.prev_log_offset)
        if req.prev_log_offset >= self.end_offset or known not in (None, req.prev_log_term):
            hint = min(self.end_offset, req.prev_log_offset) - 1
            self.transport.send(sender, AppendResponse(self.term, self.node_id, False, hint))
            return
        self._merge_entries(req.prev_log_offset + 1, req.entries)
        self.leader_commit_offset = req.leader_commit
        last_new = req.prev_log_offset + len(req.entries)
        if req.leader_commit > self.commit_offset:
            self.commit_offset = max(self.commit_offset, min(req.leader_commit, last_new))
            self._apply_committed()
        # What we committed is in every later leader's log too, so it matches as well.
        match = max(last_new, self.commit_offset)
        self.transport.send(sender, AppendResponse(self.term, self.node_id, True, match))

    def _merge_entries(self, offset: int, entries: tuple[Entry, ...]) -> None:
        for i, entry in enumerate(entries):
            at = offset + i
            if at < self.log_start_offset or self.term_at(at) == entry.term:
                continue  # in our snapshot, or already here
            if at < self.end_offset:
                if at <= self.commit_offset:
                    raise AssertionError(f"node {self.node_id} asked to overwrite committed "
                                         f"offset {at}")
                self.storage.truncate(at)
            self.storage.append(list(entries[i:]))
            return

    # -- messages and commits -------------------------------------------------------------
    def _receive(self, sender: int, message: Message) -> None:
        if self._stopped:
            return
        if message.term > self.term and not _is_pre_vote(message):
            was_leader = self.role is Role.LEADER
            self._set_role(Role.FOLLOWER, None)
            self.storage.save_vote(message.term, None)
            if was_leader:  # its timer was the heartbeat; a follower's must not be reset
                self._reset_election_timer()  # by a disruptive candidate's higher term
        if isinstance(message, VoteRequest):
            self._on_vote_request(sender, message)
        elif isinstance(message, VoteResponse):
            self._on_vote_response(message)
        elif isinstance(message, AppendRequest):
            self._on_append_request(sender, message)
        elif isinstance(message, AppendResponse):
            self._on_append_response(message)
        elif isinstance(message, FetchSnapshotRequest):
            self._on_fetch_snapshot(message)
        else:
            self._on_snapshot_chunk(sender, message)

    # -- snapshots (KIP-630's FetchSnapshot) -----------------------------------------------
    def _offer_snapshot(self, voter: int) -> None:
        """Tell a voter behind our log start to fetch the snapshot, unless it is at it."""
        snapshot = self.storage.snapshot
        asked = self._snapshot_asked.get(voter, float("-inf"))
        if snapshot is None or self.scheduler.now() - asked < self.config.election_timeout:
            return
        self.transport.send(voter, FetchSnapshotResponse(
            self.term, self.node_id, snapshot.end_offset, snapshot.term, 0, (),
            len(snapshot.records)))

    def _on_fetch_snapshot(self, req: FetchSnapshotRequest) -> None:
        snapshot = self.storage.snapshot
        if self.role is not Role.LEADER or req.term != self.term or snapshot is None:
            return
        now = self.scheduler.now()
        self._last_ack[req.follower_id] = self._snapshot_asked[req.follower_id] = now
        records: tuple[Record, ...] = ()
        position = 0
        if (req.end_offset, req.snapshot_term) == snapshot.snapshot_id:  # else: the newer one
            position = req.position
            records = snapshot.records[position:position + self.config.snapshot_chunk_records]
        self.transport.send(req.follower_id, FetchSnapshotResponse(
            self.term, self.node_id, snapshot.end_offset, snapshot.term, position, records,
            len(snapshot.records)))

    def _on_snapshot_chunk(self, sender: int, chunk: FetchSnapshotResponse) -> None:
        if chunk.term < self.term:
            self.transport.send(sender, AppendResponse(self.term, self.node_id, False, -1))
            return
        self._set_role(Role.FOLLOWER, chunk.leader_id)
        self._leader_heard = self.scheduler.now()
        self._reset_election_timer()
        if chunk.end_offset - 1 <= self.commit_offset:  # we hold all it holds
            self.transport.send(sender, AppendResponse(
                self.term, self.node_id, True, self.commit_offset))
            return
        download = self._download
        if download is None or download.snapshot_id != (chunk.end_offset, chunk.snapshot_term):
            download = self._download = SnapshotDownload(
                (chunk.end_offset, chunk.snapshot_term), chunk.total)
        if not download.add(chunk.position, chunk.records) and chunk.records:
            return  # a repeat, or past a lost chunk: the next offer resumes us
        snapshot = download.snapshot()
        if snapshot is None:
            self.transport.send(sender, FetchSnapshotRequest(
                self.term, self.node_id, chunk.end_offset, chunk.snapshot_term,
                len(download.records)))
            return
        self._download = None
        self.storage.save_snapshot(snapshot)
        self._restore(snapshot)
        log.info("node %d: installed the leader's metadata snapshot at offset %d",
                 self.node_id, snapshot.end_offset)
        self.transport.send(sender, AppendResponse(
            self.term, self.node_id, True, snapshot.end_offset - 1))

    def _restore(self, snapshot: Snapshot) -> None:
        """Our state machine becomes the snapshot's image (on start, or from the leader)."""
        last = snapshot.end_offset - 1
        if self.applied_offset < last and self.restore_hook is not None:
            self.restore_hook(snapshot)
        self.applied_offset = max(self.applied_offset, last)
        self.commit_offset = max(self.commit_offset, last)
        if self.on_applied is not None:
            self.on_applied(self.applied_offset)

    def _apply_committed(self) -> None:
        while self.applied_offset < self.commit_offset:
            self.applied_offset += 1
            entry = self.entry_at(self.applied_offset)
            if not entry.control and self.apply_hook is not None:
                self.apply_hook(self.applied_offset, entry.record)
        self._resolve_waiters()
        if self.on_applied is not None:
            self.on_applied(self.applied_offset)

    def _resolve_waiters(self) -> None:
        pending = []
        for last, future in self._waiters:
            if future.done():
                continue
            if last <= self.commit_offset:
                future.set_result(last)
            else:
                pending.append((last, future))
        self._waiters = pending

    def _fail_waiters(self, reason: str) -> None:
        waiters, self._waiters = self._waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(NotLeaderError(self.leader_id, self.term, reason))


def _is_pre_vote(message: Message) -> bool:
    """A pre-vote request names a term nobody is in yet; a granted pre-vote answer may carry
    that term too. Neither moves anyone to it (a refusal from a later term does)."""
    if isinstance(message, VoteRequest):
        return message.pre_vote
    return isinstance(message, VoteResponse) and message.pre_vote and message.granted
