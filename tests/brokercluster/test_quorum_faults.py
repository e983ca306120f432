"""The metadata quorum of three `python -m brokercore` processes under faults that must not
disturb it: a voter frozen past the election timeout (SIGSTOP) comes back as a follower."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from tests.brokerproc import ClusterProcess
from tests.cluster.faults import wait_until

NODES = (1, 2, 3)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    overrides = {
        "broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "200",
        "controller.quorum.election.timeout.ms": "500",
    }
    with ClusterProcess(tmp_path, brokers=3, overrides=overrides) as running:
        yield running


def live_brokers(cluster: ClusterProcess, node: int) -> list[int]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(node)})
    return sorted(admin.list_topics(timeout=5).brokers)


def quorum(cluster: ClusterProcess, node: int) -> dict[str, Any]:
    """The metadata partition of DescribeQuorum, asked of `node`."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_of(node))
    try:
        [partition] = admin.describe_metadata_quorum()["topics"][0]["partitions"]
    finally:
        admin.close()
    return dict(partition)


def caught_up(cluster: ClusterProcess, node: int) -> dict[str, Any] | None:
    partition = quorum(cluster, node)
    ends = {v["log_end_offset"] for v in partition["current_voters"]}
    return partition if ends == {partition["high_watermark"]} else None


def test_a_voter_paused_past_the_election_timeout_comes_back_without_an_election(
        cluster: ClusterProcess) -> None:
    wait_until("broker 1 to see three brokers", lambda: live_brokers(cluster, 1) == [1, 2, 3])
    before = wait_until("every voter to hold the leader's log", lambda: caught_up(cluster, 1))
    leader = before["leader_id"]
    paused = next(n for n in NODES if n != leader)
    cluster.pause(paused)
    # Fenced means its session (four election timeouts) lapsed: its election timer has
    # long expired, and fires as soon as it runs again.
    wait_until(f"broker {paused} to be fenced", lambda: paused not in live_brokers(cluster, leader))
    cluster.resume(paused)
    wait_until(f"broker {paused} to be back", lambda: paused in live_brokers(cluster, leader))
    after = wait_until("every voter to hold the leader's log", lambda: caught_up(cluster, leader))
    assert (after["leader_id"], after["leader_epoch"]) == (leader, before["leader_epoch"])
