"""Broker sessions on a real three-voter quorum: fencing, unfencing, controlled shutdown,
AlterPartition and elections, with short session timeouts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from brokercore.controller.controller import Controller, NewTopic
from brokercore.controller.errors import ControllerError
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .test_controller_quorum import active, free_ports, metadata_dir, quorum_config, until


class Trio:
    def __init__(self, controllers: dict[int, Controller]) -> None:
        self.controllers = controllers
        self.epochs: dict[int, int] = {}
        self.silent: set[int] = set()  # brokers whose heartbeats stop

    async def heartbeats(self) -> None:
        while True:
            for node_id, epoch in self.epochs.items():
                if node_id not in self.silent:
                    with contextlib.suppress(ControllerError):
                        await self.controllers[node_id].heartbeat(node_id, epoch)
            await asyncio.sleep(0.05)


@pytest.fixture
async def trio(tmp_path: Path) -> AsyncIterator[Trio]:
    ports = free_ports(3)
    configs = {i: quorum_config(i, ports, tmp_path, **{
        "broker.session.timeout.ms": "600", "auto.leader.rebalance.enable": "false"})
        for i in (1, 2, 3)}
    controllers = {i: Controller(c, metadata_dir(c)) for i, c in configs.items()}
    await asyncio.gather(*(c.start() for c in controllers.values()))
    trio = Trio(controllers)
    for i, c in controllers.items():
        trio.epochs[i] = await c.register_broker(i, "127.0.0.1", 9090 + i, None, f"run-{i}")
    task = asyncio.create_task(trio.heartbeats())
    yield trio
    task.cancel()
    for c in controllers.values():
        await c.stop()


def fenced_everywhere(trio: Trio, node_id: int, fenced: bool = True) -> bool:
    return all(node_id in c.image.brokers and c.image.brokers[node_id].fenced is fenced
               for c in trio.controllers.values() if c.quorum.raft and not c.quorum.raft._stopped)


async def test_a_silent_broker_is_fenced_leaves_isrs_and_is_unfenced_when_it_returns(
        trio: Trio) -> None:
    leader = active(trio.controllers)
    victim = next(i for i in trio.controllers if i != leader.node_id)
    [(_, error)] = await leader.create_topics([NewTopic("t", 3, 3)])
    assert error is None
    trio.silent.add(victim)
    await until(lambda: fenced_everywhere(trio, victim))
    for c in trio.controllers.values():
        await c.quorum.wait_applied(leader.quorum.applied_offset, 10)
        for part in c.image.topics["t"].partitions.values():
            assert part.leader != victim and part.leader in (1, 2, 3)
            assert victim not in part.isr and len(part.isr) == 2
    trio.silent.discard(victim)
    await until(lambda: fenced_everywhere(trio, victim, fenced=False))


async def test_heartbeats_with_an_old_epoch_are_refused(trio: Trio) -> None:
    follower = next(c for c in trio.controllers.values() if not c.quorum.is_active)
    with pytest.raises(ControllerError) as excinfo:
        await follower.heartbeat(follower.node_id, trio.epochs[follower.node_id] + 5)
    assert excinfo.value.error_code == ErrorCode.STALE_BROKER_EPOCH
    with pytest.raises(ControllerError) as excinfo:
        await follower.heartbeat(42, 0)
    assert excinfo.value.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


async def test_controlled_shutdown_moves_leaderships_then_reports_ready(trio: Trio) -> None:
    leader = active(trio.controllers)
    [(_, error)] = await leader.create_topics([NewTopic("s", 3, 3)])
    assert error is None
    leaving = next(i for i in trio.controllers if i != leader.node_id)
    trio.silent.add(leaving)
    node = trio.controllers[leaving]
    result = await node.heartbeat(leaving, trio.epochs[leaving], want_shutdown=True)
    assert result.fenced and result.shutdown_ready
    parts = node.image.topics["s"].partitions.values()
    assert all(p.leader != leaving and leaving not in p.isr for p in parts)


async def test_alter_partition_checks_epochs_and_shrinks_the_isr(trio: Trio) -> None:
    leader = active(trio.controllers)
    [(_, error)] = await leader.create_topics([NewTopic("a", 1, 3)])
    assert error is None
    topic = leader.image.topics["a"]
    part = topic.partitions[0]
    owner, leader_epoch, partition_epoch = part.leader, part.leader_epoch, part.partition_epoch
    follower = next(c for c in trio.controllers.values() if c is not leader)
    shrunk = [r for r in part.isr if r != part.replicas[-1]]
    got = await follower.alter_partition(topic.topic_id, 0, owner, leader_epoch,
                                         partition_epoch, shrunk)
    assert got.isr == shrunk and got.partition_epoch == partition_epoch + 1
    with pytest.raises(ControllerError) as excinfo:
        await follower.alter_partition(topic.topic_id, 0, owner, leader_epoch,
                                       partition_epoch, shrunk)  # a stale epoch
    assert excinfo.value.error_code == ErrorCode.INVALID_UPDATE_VERSION


async def test_preferred_election_is_not_needed_when_the_preferred_replica_leads(
        trio: Trio) -> None:
    leader = active(trio.controllers)
    [(_, error)] = await leader.create_topics([NewTopic("e", 2, 3)])
    assert error is None
    follower = next(c for c in trio.controllers.values() if c is not leader)
    results = await follower.elect_leaders(0, [TopicPartition("e", 0), TopicPartition("e", 9)])
    codes = {tp.partition: e.error_code if e else None for tp, e in results.items()}
    assert codes == {0: ErrorCode.ELECTION_NOT_NEEDED, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


async def test_a_reassignment_is_listed_on_every_node_and_can_be_cancelled(
        trio: Trio) -> None:
    leader = active(trio.controllers)
    [(_, error)] = await leader.create_topics(
        [NewTopic("r", assignments={0: [1, 2]})])
    assert error is None
    follower = next(c for c in trio.controllers.values() if c is not leader)
    tp = TopicPartition("r", 0)
    assert await follower.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
    listed = await follower.list_partition_reassignments()
    assert listed == {tp: ([2, 3, 1], [3], [1])}
    assert await follower.alter_partition_reassignments({tp: None}) == {tp: None}
    assert await follower.list_partition_reassignments() == {}


async def test_a_long_controller_call_fences_no_broker_and_moves_no_leader(trio: Trio) -> None:
    # A call that holds the controller for three session timeouts, as creating hundreds of
    # topics in one CreateTopics does: brokers that keep heartbeating must keep their
    # sessions, so existing partitions keep their leaders and leader epochs (KAFKA-17793).
    leader = active(trio.controllers)
    [(_, error)] = await leader.create_topics([NewTopic("steady", 3, 3)])
    assert error is None
    before = {i: (p.leader, p.leader_epoch)
              for i, p in leader.image.topics["steady"].partitions.items()}
    async with leader._lock:  # the one lock every controller call runs under
        await asyncio.sleep(3 * leader.lifecycle.session_timeout)
    await asyncio.sleep(leader.lifecycle.session_timeout)  # the session check that waited
    assert not any(b.fenced for b in leader.image.brokers.values())
    after = {i: (p.leader, p.leader_epoch)
             for i, p in leader.image.topics["steady"].partitions.items()}
    assert after == before
