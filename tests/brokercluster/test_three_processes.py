"""Three `python -m brokercore` processes on one metadata quorum, driven by a real client:
the active controller is killed with SIGKILL, another takes over, and the dead broker's
leaderships move away until it returns."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from tests.brokerproc import ClusterProcess
from tests.cluster.faults import wait_until

NODES = (1, 2, 3)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    overrides = {
        "default.replication.factor": "3", "broker.session.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "200", "controller.quorum.election.timeout.ms": "500",
        "auto.leader.rebalance.enable": "false",
    }
    with ClusterProcess(tmp_path, brokers=3, overrides=overrides) as running:
        yield running


def metadata(cluster: ClusterProcess, node: int) -> Any:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_of(node)}).list_topics(timeout=5)


def view(cluster: ClusterProcess, node: int, topic: str
         ) -> tuple[int, list[int], dict[int, tuple[int, list[int]]]]:
    md = metadata(cluster, node)
    parts = md.topics[topic].partitions
    return (md.controller_id, sorted(md.brokers),
            {p: (parts[p].leader, sorted(parts[p].isrs)) for p in parts})


def test_three_brokers_agree_survive_the_active_controller_and_take_it_back(
        cluster: ClusterProcess) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(2)})
    wait_until("broker 2 to see three brokers", lambda: len(metadata(cluster, 2).brokers) == 3)
    admin.create_topics([NewTopic("replicated", num_partitions=3,
                                  replication_factor=3)])["replicated"].result(timeout=20)

    def agreed() -> list[Any] | None:
        views = [view(cluster, n, "replicated") for n in NODES]
        return views if len({repr(v) for v in views}) == 1 else None

    controller_id, brokers, partitions = wait_until("every broker to agree", agreed)[0]
    assert controller_id in NODES and brokers == [1, 2, 3]
    assert all(isr == [1, 2, 3] for _, isr in partitions.values())

    cluster.kill(controller_id)
    survivors = [n for n in NODES if n != controller_id]

    def moved() -> bool:
        for node in survivors:
            new_controller, live, parts = view(cluster, node, "replicated")
            if new_controller in (-1, controller_id) or controller_id in live:
                return False
            if any(leader == controller_id or controller_id in isr
                   for leader, isr in parts.values()):
                return False
        return True

    wait_until("another controller, and the dead broker's leaderships and ISR places moved",
               moved)
    survivor_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(survivors[0])})
    survivor_admin.create_topics(
        [NewTopic("after-failover", 1, 2)])["after-failover"].result(timeout=20)
    wait_until("the new topic on every survivor",
               lambda: all("after-failover" in metadata(cluster, n).topics for n in survivors))

    cluster.start(controller_id)
    wait_until("every broker to list all three again",
               lambda: all(sorted(metadata(cluster, n).brokers) == [1, 2, 3] for n in NODES))


def test_describe_quorum_from_any_broker_names_the_leader_and_every_voters_progress(
        cluster: ClusterProcess) -> None:
    wait_until("broker 1 to see three brokers", lambda: len(metadata(cluster, 1).brokers) == 3)
    controller_id = metadata(cluster, 1).controller_id
    asked = next(n for n in NODES if n != controller_id)  # forwarded to the leader
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_of(asked))
    try:
        def caught_up() -> dict[str, Any] | None:
            [partition] = admin.describe_metadata_quorum()["topics"][0]["partitions"]
            ends = {v["log_end_offset"] for v in partition["current_voters"]}
            return partition if ends == {partition["high_watermark"]} else None

        partition = wait_until("every voter to hold the leader's log", caught_up)
        quorum = admin.describe_metadata_quorum()
    finally:
        admin.close()
    assert partition["leader_id"] == controller_id and partition["leader_epoch"] >= 1
    assert sorted(v["replica_id"] for v in partition["current_voters"]) == list(NODES)
    assert all(v["last_fetch_timestamp"] > 0 for v in partition["current_voters"])
    assert sorted(n["node_id"] for n in quorum["nodes"]) == list(NODES)
    assert {n["listeners"][0]["name"] for n in quorum["nodes"]} == {"CONTROLLER"}
