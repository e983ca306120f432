"""Controllers on a real quorum: three in one process over the controller listener."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from brokercore.config import BrokerConfig
from brokercore.controller.controller import MAX_RECORDS_PER_PROPOSAL, Controller, NewTopic
from brokercore.controller.errors import ControllerError
from brokercore.controller.records import TopicRecord
from brokercore.protocol.errors import ErrorCode


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def quorum_config(node_id: int, ports: list[int], tmp_path: Path,
                  **extra: str) -> BrokerConfig:
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    return BrokerConfig({
        "node.id": str(node_id), "log.dirs": str(tmp_path / f"broker-{node_id}"),
        "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{ports[node_id - 1]}",
        "controller.quorum.voters": voters,
        "controller.quorum.election.timeout.ms": "300",
        "controller.quorum.request.timeout.ms": "5000",
        **{k.replace("_", "."): v for k, v in extra.items()},
    })


def metadata_dir(config: BrokerConfig) -> Path:
    return config.log_dirs[0] / "__cluster_metadata-0"


async def until(condition: Callable[[], bool]) -> None:
    """Poll `condition` (real sockets and timers: there is no one event) for up to 20 s."""
    async with asyncio.timeout(20):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


@pytest.fixture
async def trio(tmp_path: Path) -> AsyncIterator[dict[int, Controller]]:
    ports = free_ports(3)
    controllers = {i: Controller(c, metadata_dir(c))
                   for i in (1, 2, 3) for c in [quorum_config(i, ports, tmp_path)]}
    await asyncio.gather(*(c.start() for c in controllers.values()))
    for i, c in controllers.items():
        await c.register_broker(i, "127.0.0.1", 9090 + i)
    yield controllers
    for c in controllers.values():
        await c.stop()


def active(controllers: dict[int, Controller]) -> Controller:
    [leader] = [c for c in controllers.values() if c.quorum.is_active]
    return leader


async def test_every_node_agrees_on_the_active_controller_and_the_cluster_id(
        trio: dict[int, Controller]) -> None:
    leader = active(trio)
    assert {c.active_controller_id for c in trio.values()} == {leader.node_id}
    assert len({c.image.cluster_id for c in trio.values()}) == 1
    await until(lambda: all(len(c.image.brokers) == 3 for c in trio.values()))


async def test_create_topics_on_a_follower_lands_once_and_is_visible_there_at_once(
        trio: dict[int, Controller]) -> None:
    leader = active(trio)
    follower = next(c for c in trio.values() if c is not leader)
    [(topic, error)] = await follower.create_topics([NewTopic("orders", 2, 3)])
    assert error is None
    assert (topic.num_partitions, topic.replication_factor) == (2, 3)
    assert "orders" in follower.image.topics  # applied here before the call returned
    assert follower.image.topics["orders"].partitions[0].replicas == [1, 2, 3]

    [(_, again)] = await follower.create_topics([NewTopic("orders", 2, 3)])
    assert again is not None and again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert leader.quorum.raft is not None
    written = [e.record for e in leader.quorum.raft.log if e.record.get("type") == "topic"]
    assert [r["name"] for r in written] == ["orders"]


async def test_errors_travel_back_with_their_kafka_code(trio: dict[int, Controller]) -> None:
    follower = next(c for c in trio.values() if not c.quorum.is_active)
    with pytest.raises(ControllerError) as excinfo:
        await follower.delete_topic("nope")
    assert excinfo.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_a_node_that_is_not_active_answers_not_controller(
        trio: dict[int, Controller]) -> None:
    leader = active(trio)
    follower = next(c for c in trio.values() if c is not leader)
    with pytest.raises(ControllerError) as excinfo:
        await leader.quorum.rpc.call(follower.node_id, "delete_topic", {"name": "x"})
    assert excinfo.value.error_code == ErrorCode.NOT_CONTROLLER


async def test_producer_id_blocks_never_overlap_across_nodes(
        trio: dict[int, Controller]) -> None:
    ids = [await c.allocate_producer_id() for c in trio.values() for _ in range(3)]
    assert len(set(ids)) == 9


async def test_a_new_active_controller_takes_over_when_the_leader_stops(
        trio: dict[int, Controller]) -> None:
    leader = active(trio)
    await leader.stop()
    rest = {i: c for i, c in trio.items() if c is not leader}
    await until(lambda: any(c.quorum.is_active for c in rest.values()))
    follower = next(c for c in rest.values() if not c.quorum.is_active)
    [(_, error)] = await follower.create_topics([NewTopic("after", 1, 2)])
    assert error is None
    assert all("after" in c.image.topics for c in rest.values()
               if c.quorum.applied_offset >= follower.quorum.applied_offset)


async def test_a_single_node_log_is_migrated_into_the_raft_log(tmp_path: Path) -> None:
    config = BrokerConfig({"node.id": "1", "log.dirs": str(tmp_path),
                           "listeners": "PLAINTEXT://127.0.0.1:0"})
    directory = metadata_dir(config)
    directory.mkdir(parents=True)
    old = [{"type": "cluster", "cluster_id": "old-cluster"},
           {"type": "broker", "node_id": 1, "host": "h", "port": 1, "fenced": False,
            "epoch": 0},
           {"type": "topic", "name": "kept", "topic_id": "6f1c7d7e-0000-4000-8000-000000000001"},
           {"type": "producer_ids", "block_end": 2000}]
    lines = [json.dumps({"offset": i, "record": r}) + "\n" for i, r in enumerate(old)]
    (directory / "metadata.jsonl").write_text("".join(lines) + '{"offset": 4, "rec')

    for _ in range(2):  # the second start reads the Raft log alone
        controller = Controller(config, directory)
        await controller.start()
        assert not (directory / "metadata.jsonl").exists()
        assert controller.image.cluster_id == "old-cluster"
        assert set(controller.image.topics) == {"kept"}
        assert await controller.allocate_producer_id() >= 2000
        await controller.stop()
    assert sorted(p.name for p in directory.iterdir()) == ["quorum-state.json", "raft.jsonl"]


async def lone_voter_creating(tmp_path: Path, topics: list[NewTopic],
                              ) -> tuple[list[ControllerError | None], list[str]]:
    """Create `topics` in one call on a lone voter, which commits and applies each proposal
    inside the call, while another task ticks: the errors, and the created topics' names
    interleaved with "other" wherever that task ran."""
    config = quorum_config(1, free_ports(1), tmp_path)
    controller = Controller(config, metadata_dir(config))
    await controller.start()
    await controller.register_broker(1, "127.0.0.1", 9091)
    seen: list[str] = []
    controller.listeners.append(
        lambda record: seen.append(record.name) if isinstance(record, TopicRecord) else None)

    async def other_task() -> None:
        while True:
            seen.append("other")
            await asyncio.sleep(0)

    ticking = asyncio.create_task(other_task())
    try:
        results = await controller.create_topics(topics)
    finally:
        ticking.cancel()
        await controller.stop()
    return [error for _, error in results], seen


async def test_a_lone_voter_serves_other_tasks_between_the_proposals_of_one_call(
        tmp_path: Path) -> None:
    # Three topics too big to share a proposal: the broker's heartbeats and fetches must not
    # wait until the last of many big topics is applied.
    partitions = MAX_RECORDS_PER_PROPOSAL * 2 // 3
    errors, seen = await lone_voter_creating(
        tmp_path, [NewTopic(n, partitions, 1) for n in "abc"])
    assert errors == [None, None, None]
    created = [seen.index(n) for n in "abc"]
    assert all("other" in seen[a:b] for a, b in itertools.pairwise(created))


async def test_many_small_topics_of_one_call_are_one_proposal(tmp_path: Path) -> None:
    names = [f"t{i}" for i in range(100)]
    topics = [NewTopic(n, 1, 1) for n in names] + [NewTopic("t7", 1, 1)]
    errors, seen = await lone_voter_creating(tmp_path, topics)
    assert errors[:100] == [None] * 100
    assert errors[100] is not None and errors[100].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    # Applied in one go: nothing else ran between the first topic and the last.
    assert seen[seen.index("t0"):seen.index("t99") + 1] == names
