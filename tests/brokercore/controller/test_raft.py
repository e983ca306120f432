"""The metadata quorum under elections, crashes and partitions, in simulated time.

Every test runs the harness's invariant checks (election safety, leader completeness,
committed entries never change) after every event, and log matching and state-machine
safety at the end.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from brokercore.controller.image import Record
from brokercore.controller.raft import NotLeaderError, RaftNode, Role
from brokercore.controller.raft_storage import Entry, FileRaftStorage, MemoryRaftStorage
from brokercore.controller.raft_transport import (
    AppendResponse,
    InMemoryNetwork,
    SimulatedScheduler,
    VoteRequest,
    VoteResponse,
)

from .harness import Cluster


def test_a_single_voter_elects_itself_and_commits_alone() -> None:
    cluster = Cluster(1)
    leader = cluster.wait_for_leader()
    first = cluster.propose(3)
    assert first == 1  # offset 0 is the leader's control entry
    assert leader.commit_offset == 3
    assert [r["n"] for _, r in cluster.applied[1]] == [0, 1, 2]
    cluster.check_all()


def test_three_voters_elect_one_leader_and_replicate_to_all() -> None:
    cluster = Cluster(3, seed=7)
    cluster.wait_for_leader()
    first = cluster.propose(5)
    assert first is not None
    assert cluster.run_until(lambda: cluster.committed_on(cluster.ids, first + 4))
    cluster.run(1.0)
    assert [len(a) for a in cluster.applied.values()] == [5, 5, 5]
    cluster.check_all()


def test_a_follower_knows_the_leader_and_refuses_proposals() -> None:
    cluster = Cluster(3, seed=3)
    leader = cluster.wait_for_leader()
    cluster.run(0.5)
    follower = next(n for n in cluster.nodes.values() if n is not leader)
    with pytest.raises(NotLeaderError) as excinfo:
        follower.append_nowait([{"type": "test", "n": -1}])
    assert excinfo.value.leader_id == leader.node_id


@pytest.mark.parametrize("victim", ["leader", "follower"])
def test_losing_any_one_of_three_keeps_committing(victim: str) -> None:
    cluster = Cluster(3, seed=11)
    leader = cluster.wait_for_leader()
    down = leader.node_id if victim == "leader" else next(i for i in cluster.ids
                                                          if i != leader.node_id)
    cluster.crash(down)
    new_leader = cluster.wait_for_leader()
    first = cluster.propose(2)
    assert first is not None
    live = [i for i in cluster.ids if i != down]
    assert cluster.run_until(lambda: cluster.committed_on(live, first + 1))
    assert new_leader.node_id != down
    cluster.check_all()


def test_two_of_three_down_commits_nothing_until_one_returns() -> None:
    cluster = Cluster(3, seed=5)
    leader = cluster.wait_for_leader()
    cluster.run(0.5)
    survivor = leader.node_id
    for i in cluster.ids:
        if i != survivor:
            cluster.crash(i)
    commit_before = leader.commit_offset
    first = cluster.propose(1)
    assert first is not None
    cluster.run(10.0)
    assert cluster.nodes[survivor].commit_offset == commit_before
    assert cluster.nodes[survivor].role is not Role.LEADER  # it stepped down, lacking a quorum
    returning = next(i for i in cluster.ids if i != survivor)
    cluster.start(returning)
    cluster.wait_for_leader()
    after = cluster.propose(1)
    assert after is not None
    assert cluster.run_until(lambda: cluster.committed_on([survivor, returning], after))
    cluster.check_all()


def test_a_partitioned_leader_is_replaced_and_rejoins_as_follower() -> None:
    cluster = Cluster(3, seed=13)
    old = cluster.wait_for_leader()
    others = {i for i in cluster.ids if i != old.node_id}
    cluster.network.partition({old.node_id}, others)
    stranded = cluster.propose(1)  # taken by the old leader, never committed
    assert stranded is not None
    assert cluster.run_until(lambda: any(cluster.nodes[i].role is Role.LEADER for i in others))
    majority_side = cluster.leader()
    assert majority_side is not None and majority_side.node_id in others
    first = majority_side.append_nowait([{"type": "test", "n": 100}])
    assert cluster.run_until(lambda: cluster.committed_on(sorted(others), first))
    cluster.network.heal()
    assert cluster.run_until(lambda: cluster.committed_on(cluster.ids, first))
    cluster.run(2.0)
    assert old.log[stranded].record != {"type": "test", "n": 0}  # overwritten, not applied
    assert all((stranded, {"type": "test", "n": 0}) not in a for a in cluster.all_applied)
    cluster.check_all()


def test_a_restarted_node_recovers_its_log_and_catches_up() -> None:
    cluster = Cluster(3, seed=17)
    cluster.wait_for_leader()
    first = cluster.propose(20)
    assert first is not None
    assert cluster.run_until(lambda: cluster.committed_on(cluster.ids, first + 19))
    cluster.crash(2)
    term_before = cluster.storages[2].term
    leader = cluster.wait_for_leader()
    more = leader.append_nowait([{"type": "test", "n": 1000 + i} for i in range(10)])
    cluster.start(2)
    assert cluster.storages[2].term >= term_before
    assert cluster.run_until(lambda: cluster.committed_on([2], more + 9))
    assert [r["n"] for _, r in cluster.applied[2]][-10:] == list(range(1000, 1010))
    cluster.check_all()


def test_a_whole_quorum_restart_keeps_every_committed_record() -> None:
    cluster = Cluster(3, seed=19)
    cluster.wait_for_leader()
    first = cluster.propose(5)
    assert first is not None
    assert cluster.run_until(lambda: cluster.committed_on(cluster.ids, first + 4))
    for i in cluster.ids:
        cluster.crash(i)
    for i in cluster.ids:
        cluster.start(i)
    leader = cluster.wait_for_leader()
    assert cluster.run_until(lambda: cluster.committed_on(cluster.ids, leader.end_offset - 1))
    assert [r["n"] for _, r in cluster.applied[leader.node_id]] == [0, 1, 2, 3, 4]
    cluster.check_all()


async def test_propose_resolves_with_the_first_offset_once_committed() -> None:
    scheduler = SimulatedScheduler()
    network = InMemoryNetwork(scheduler, random.Random(1))
    nodes = [RaftNode(i, {1, 2, 3}, MemoryRaftStorage(), network.transport(i), scheduler,
                      rng=random.Random(i)) for i in (1, 2, 3)]
    assert scheduler.run_until(lambda: any(n.role is Role.LEADER for n in nodes), 30)
    leader = next(n for n in nodes if n.role is Role.LEADER)
    task = asyncio.ensure_future(leader.propose([{"type": "test", "n": 1}]))
    await asyncio.sleep(0)
    assert not task.done()
    scheduler.run_for(1.0)
    assert await asyncio.wait_for(task, 1.0) == 1
    assert all(n.commit_offset >= 1 for n in nodes)


async def test_propose_fails_with_not_leader_when_leadership_is_lost() -> None:
    scheduler = SimulatedScheduler()
    network = InMemoryNetwork(scheduler, random.Random(1))
    nodes = [RaftNode(i, {1, 2, 3}, MemoryRaftStorage(), network.transport(i), scheduler,
                      rng=random.Random(i)) for i in (1, 2, 3)]
    assert scheduler.run_until(lambda: any(n.role is Role.LEADER for n in nodes), 30)
    leader = next(n for n in nodes if n.role is Role.LEADER)
    network.partition({leader.node_id})
    task = asyncio.ensure_future(leader.propose([{"type": "test", "n": 1}]))
    await asyncio.sleep(0)
    scheduler.run_for(5.0)
    with pytest.raises(NotLeaderError):
        await asyncio.wait_for(task, 1.0)


def test_a_single_voter_restarts_from_its_files_and_replays_every_record(tmp_path: Path) -> None:
    def boot() -> tuple[RaftNode, SimulatedScheduler, list[tuple[int, Record]]]:
        scheduler = SimulatedScheduler()
        applied: list[tuple[int, Record]] = []
        node = RaftNode(1, {1}, FileRaftStorage(tmp_path), InMemoryNetwork(
            scheduler, random.Random(0)).transport(1), scheduler,
            apply=lambda offset, record: applied.append((offset, record)))
        assert scheduler.run_until(lambda: node.role is Role.LEADER, 30)
        return node, scheduler, applied

    node, _, applied = boot()
    node.append_nowait([{"type": "topic", "name": "a", "topic_id": "x"}])
    node.append_nowait([{"type": "topic", "name": "b", "topic_id": "y"}])
    before = list(applied)
    node.stop()
    node.storage.close()
    node, _, applied = boot()
    assert node.term == 2
    assert applied == before == [(1, {"type": "topic", "name": "a", "topic_id": "x"}),
                                 (2, {"type": "topic", "name": "b", "topic_id": "y"})]
    assert node.commit_offset == 3  # the new term's control entry


class _Recorder:
    """A transport that only remembers what the node sent; the test plays the peers."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, object]] = []

    def bind(self, handler: object) -> None:
        self.handler = handler

    def send(self, to: int, message: object) -> None:
        self.sent.append((to, message))


def test_a_leader_counts_replicas_only_for_entries_of_its_own_term() -> None:
    # Raft §5.4.2 (the paper's figure 8): an entry of an earlier term held by a majority
    # can still be overwritten by a later leader, so it commits only with one of our own.
    storage = MemoryRaftStorage()
    storage.save_vote(2, None)
    storage.append([Entry(1, {"type": "test", "n": 0}), Entry(2, {"type": "test", "n": 1})])
    scheduler = SimulatedScheduler()
    transport = _Recorder()
    applied: list[tuple[int, Record]] = []
    node = RaftNode(1, {1, 2, 3}, storage, transport, scheduler,
                    apply=lambda offset, record: applied.append((offset, record)))
    assert scheduler.run_until(lambda: node.role is Role.PROSPECTIVE, 30)
    assert node.term == 2  # a pre-vote first, in the term it would stand in
    assert transport.sent[-1][1] == VoteRequest(3, 1, 1, 2, pre_vote=True)
    node._receive(2, VoteResponse(2, 2, True, pre_vote=True))
    assert (node.role.value, node.term) == ("candidate", 3)
    node._receive(2, VoteResponse(3, 2, True))
    assert node.role.value == "leader"
    assert node.log[2].control and node.log[2].term == 3

    node._receive(2, AppendResponse(3, 2, True, 1))  # voter 2 holds offsets 0-1, not 2
    assert node.commit_offset == -1
    assert applied == []

    node._receive(2, AppendResponse(3, 2, True, 2))  # now it holds our own term's entry
    assert node.commit_offset == 2
    assert [offset for offset, _ in applied] == [0, 1]


def test_a_follower_cut_off_past_the_election_timeout_rejoins_without_an_election() -> None:
    cluster = Cluster(3, seed=23)
    leader = cluster.wait_for_leader()
    cluster.run(0.5)
    term = leader.term
    straggler = next(i for i in cluster.ids if i != leader.node_id)
    cluster.network.partition({straggler}, {i for i in cluster.ids if i != straggler})
    cluster.run(10.0)  # many election timeouts: it keeps asking for pre-votes, in vain
    assert cluster.nodes[straggler].term == term
    assert cluster.nodes[straggler].role is Role.PROSPECTIVE
    cluster.network.heal()
    first = cluster.propose(1)
    assert first is not None
    assert cluster.run_until(lambda: cluster.committed_on(cluster.ids, first))
    assert cluster.leader() is leader and leader.term == term
    assert cluster.nodes[straggler].role is Role.FOLLOWER
    cluster.check_all()


def test_voters_that_hear_from_their_leader_refuse_pre_votes() -> None:
    cluster = Cluster(3, seed=29)
    leader = cluster.wait_for_leader()
    cluster.run(0.5)
    follower = next(n for n in cluster.nodes.values() if n is not leader)
    answers: list[object] = []
    cluster.network.handlers[99] = lambda sender, message: answers.append(message)
    for node in (leader, follower):
        node._receive(99, VoteRequest(node.term + 1, 99, node.end_offset + 10, node.term,
                                      pre_vote=True))
    cluster.run(0.1)
    assert answers == [VoteResponse(leader.term, leader.node_id, False, True),
                       VoteResponse(follower.term, follower.node_id, False, True)]
    assert leader.role is Role.LEADER and follower.leader_id == leader.node_id
