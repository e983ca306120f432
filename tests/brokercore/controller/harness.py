"""A simulated quorum: RaftNodes on an in-memory network in simulated time, watched for
Raft's safety properties after every single event."""

from __future__ import annotations

import itertools
import random

from brokercore.controller.image import Record
from brokercore.controller.raft import NotLeaderError, RaftConfig, RaftNode, Role
from brokercore.controller.raft_snapshots import Snapshot
from brokercore.controller.raft_storage import Entry, MemoryRaftStorage
from brokercore.controller.raft_transport import InMemoryNetwork, SimulatedScheduler

CONFIG = RaftConfig(election_timeout=1.0, heartbeat_interval=0.1, max_entries_per_append=8,
                    snapshot_chunk_records=16)


class Cluster:
    def __init__(self, size: int, seed: int = 0, *, loss: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.scheduler = SimulatedScheduler()
        self.network = InMemoryNetwork(self.scheduler, random.Random(seed + 1), loss=loss)
        self.ids = list(range(1, size + 1))
        self.storages = {i: MemoryRaftStorage() for i in self.ids}
        self.nodes: dict[int, RaftNode] = {}
        self.applied: dict[int, list[tuple[int, Record]]] = {}  # this incarnation's
        self.replayed: dict[int, list[int]] = {}  # offsets this incarnation applied itself
        self.all_applied: list[list[tuple[int, Record]]] = []  # every incarnation's
        self.leaders_by_term: dict[int, int] = {}
        self.committed: dict[int, Entry] = {}  # offset -> entry, as any node has seen it
        self.commit_term: dict[int, int] = {}  # offset -> a term no earlier than its commit
        self._seen_commit: dict[int, int] = {}
        self._counter = itertools.count()
        for i in self.ids:
            self.start(i)

    # -- faults ---------------------------------------------------------------------------
    def start(self, node_id: int) -> RaftNode:
        applied: list[tuple[int, Record]] = []
        self.applied[node_id] = applied
        self.replayed[node_id] = []
        self.all_applied.append(applied)
        self.network.down.discard(node_id)
        node = RaftNode(
            node_id, set(self.ids), self.storages[node_id], self.network.transport(node_id),
            self.scheduler, apply=lambda offset, record: self._apply(node_id, offset, record),
            restore=lambda snapshot: _restore(applied, snapshot),
            config=CONFIG, rng=random.Random(self.rng.random()),
        )
        self.nodes[node_id] = node
        self._seen_commit[node_id] = -1
        return node

    def _apply(self, node_id: int, offset: int, record: Record) -> None:
        self.applied[node_id].append((offset, record))
        self.replayed[node_id].append(offset)

    def crash(self, node_id: int) -> None:
        self.nodes.pop(node_id).stop()
        self.network.down.add(node_id)

    def wipe(self, node_id: int) -> None:
        """Lose a crashed node's storage (a disk replaced)."""
        self.storages[node_id] = MemoryRaftStorage()

    def snapshot(self, node_id: int) -> Snapshot | None:
        """Snapshot the node's state machine: the (offset, record) pairs it applied."""
        applied = self.applied[node_id]
        return self.nodes[node_id].take_snapshot(
            [{"type": "applied", "offset": offset, "record": record}
             for offset, record in applied])

    # -- driving --------------------------------------------------------------------------
    def run(self, seconds: float) -> None:
        self.scheduler.run_until(self._check_and_continue, seconds)

    def run_until(self, condition: object, timeout: float = 30.0) -> bool:
        assert callable(condition)
        return self.scheduler.run_until(lambda: self._check() or bool(condition()), timeout)

    def leader(self) -> RaftNode | None:
        """The live leader of the highest term, if any."""
        leaders = [n for n in self.nodes.values() if n.role is Role.LEADER]
        return max(leaders, key=lambda n: n.term, default=None)

    def wait_for_leader(self, timeout: float = 30.0) -> RaftNode:
        assert self.run_until(lambda: self.leader() is not None, timeout), "no leader elected"
        leader = self.leader()
        assert leader is not None
        return leader

    def propose(self, count: int = 1) -> int | None:
        """Append `count` new records at the current leader; the first offset, or None."""
        leader = self.leader()
        if leader is None:
            return None
        records = [{"type": "test", "n": next(self._counter)} for _ in range(count)]
        try:
            return leader.append_nowait(records)
        except NotLeaderError:
            return None

    def committed_on(self, node_ids: list[int], offset: int) -> bool:
        return all(self.nodes[i].commit_offset >= offset for i in node_ids)

    # -- invariants -----------------------------------------------------------------------
    def _check_and_continue(self) -> bool:
        self._check()
        return False

    def _check(self) -> bool:
        for node in self.nodes.values():
            self._check_election_safety_and_completeness(node)
            self._check_commits(node)
        return False

    def _check_election_safety_and_completeness(self, node: RaftNode) -> None:
        if node.role is not Role.LEADER:
            return
        if node.term in self.leaders_by_term:
            known = self.leaders_by_term[node.term]
            assert known == node.node_id, f"term {node.term} has leaders {known}, {node.node_id}"
            return
        self.leaders_by_term[node.term] = node.node_id
        for offset, entry in self.committed.items():
            if self.commit_term[offset] >= node.term or offset < node.log_start_offset:
                continue  # later, or in its snapshot
            assert offset < node.end_offset and node.entry_at(offset) == entry, (
                f"leader {node.node_id} of term {node.term} lacks committed offset {offset}")

    def _check_commits(self, node: RaftNode) -> None:
        seen = self._seen_commit[node.node_id]
        for offset in range(max(seen + 1, node.log_start_offset), node.commit_offset + 1):
            entry = node.entry_at(offset)
            first = self.committed.setdefault(offset, entry)
            self.commit_term.setdefault(offset, node.term)
            assert first == entry, f"offset {offset} committed as {first} and as {entry}"
        self._seen_commit[node.node_id] = max(seen, node.commit_offset)

    def check_log_matching(self) -> None:
        """Where two logs hold an entry of the same term, they hold the same entries below
        it (as far as both still hold them)."""
        logs = [dict(enumerate(s.entries, s.start_offset)) for s in self.storages.values()]
        for a, b in itertools.combinations(logs, 2):
            common = sorted(a.keys() & b.keys())
            same_term = [i for i in common if a[i].term == b[i].term]
            if same_term:
                below = [i for i in common if i <= same_term[-1]]
                assert all(a[i] == b[i] for i in below), "logs agree on a term, not the prefix"

    def check_state_machine_safety(self) -> None:
        longest = max(self.all_applied, key=len)
        for applied in self.all_applied:
            assert applied == longest[:len(applied)], "nodes applied different sequences"
        for offset, record in longest:
            assert self.committed[offset].record == record

    def check_all(self) -> None:
        self._check()
        self.check_log_matching()
        self.check_state_machine_safety()


def _restore(applied: list[tuple[int, Record]], snapshot: Snapshot) -> None:
    applied[:] = [(r["offset"], r["record"]) for r in snapshot.records]
