"""The metadata quorum of three `python -m brokercore` processes under faults: a voter frozen
past the election timeout (SIGSTOP) comes back as a follower without disturbing the quorum,
and a broker whose disk was wiped catches up from the leader's metadata snapshot."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest

from tests.brokercore.wire import WireClient
from tests.brokerproc import ClusterProcess
from tests.cluster.faults import wait_until

NODES = (1, 2, 3)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    overrides = {
        "broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "200",
        "controller.quorum.election.timeout.ms": "500",
        "metadata.log.max.record.bytes.between.snapshots": "4000",
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


def write_metadata(bootstrap: str, topics: list[str], rounds: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 3, 3) for t in topics]).values():
        future.result(timeout=30)
    for n in range(rounds):
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
            ConfigEntry("retention.ms", str(86_400_000 + n),
                        incremental_operation=AlterConfigOpType.SET)]) for t in topics]
        for future in admin.incremental_alter_configs(resources).values():
            future.result(timeout=30)


def retention_seen_by(cluster: ClusterProcess, node: int, topic: str) -> str:
    """The topic's retention.ms as `node` itself answers DescribeConfigs (clients' admin
    calls may go to any broker)."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[resource(
        resource_type=2, resource_name=topic, configuration_keys=["retention.ms"])],
        include_synonyms=False, include_documentation=False)
    with WireClient(cluster.bootstrap_of(node)) as client:
        [result] = client.request(request, version=4).results
    assert result.error_code == 0, result
    [config] = result.configs
    return str(config.value)


def test_a_broker_wiped_clean_catches_up_from_the_leaders_snapshot(
        cluster: ClusterProcess) -> None:
    wait_until("broker 1 to see three brokers", lambda: live_brokers(cluster, 1) == [1, 2, 3])
    topics = [f"wiped-{i}" for i in range(5)]
    write_metadata(cluster.bootstrap, topics, rounds=60)
    leader = wait_until("every voter to hold the leader's log",
                        lambda: caught_up(cluster, 1))["leader_id"]
    assert first_log_offset(cluster, leader) > 0  # the leader's log no longer starts at 0
    wiped = next(n for n in NODES if n != leader)
    log_dir = Path(cluster.broker(wiped)["log_dir"])
    cluster.kill(wiped)
    shutil.rmtree(log_dir)
    cluster.start(wiped)

    assert retention_seen_by(cluster, wiped, topics[-1]) == str(86_400_000 + 59)
    assert first_log_offset(cluster, wiped) > 0  # so it came by the snapshot
    assert "installed the leader's metadata snapshot" in cluster.broker_log(wiped)


def first_log_offset(cluster: ClusterProcess, node: int) -> int:
    """The first offset in the node's metadata log file (its log end if it holds none)."""
    directory = Path(cluster.broker(node)["log_dir"]) / "__cluster_metadata-0"
    with open(directory / "raft.jsonl", "rb") as f:
        first = f.readline()
    if first:
        return int(json.loads(first)["offset"])
    return max(int(p.name.split("-")[0]) for p in directory.glob("*.checkpoint"))


def test_a_broker_paused_past_the_leaders_log_start_follows_the_snapshot_it_fetched(
        cluster: ClusterProcess) -> None:
    wait_until("broker 1 to see three brokers", lambda: live_brokers(cluster, 1) == [1, 2, 3])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic("doomed", 2, 3)]).values():
        future.result(timeout=30)
    kept = ["kept-0", "kept-1"]
    write_metadata(cluster.bootstrap, kept, rounds=1)
    leader = wait_until("every voter to hold the leader's log",
                        lambda: caught_up(cluster, 1))["leader_id"]
    paused = next(n for n in NODES if n != leader)
    doomed_logs = list(Path(cluster.broker(paused)["log_dir"]).glob("doomed-*"))
    assert len(doomed_logs) == 2
    cluster.pause(paused)
    wait_until(f"broker {paused} to be fenced", lambda: paused not in live_brokers(cluster, leader))
    # First the leader's log start passes the paused broker's log end, so the appends queued
    # for it end there; then the topic is deleted, and snapshotted: the paused broker can
    # only learn of the deletion from the snapshot it will fetch.
    alter_rounds(admin, kept, 0, 40)
    assert first_log_offset(cluster, leader) > last_log_offset(cluster, paused)
    for future in admin.delete_topics(["doomed"]).values():
        future.result(timeout=30)
    alter_rounds(admin, kept, 40, 80)
    cluster.resume(paused)

    wait_until(f"broker {paused} to install the snapshot", lambda: "installed the leader's "
               "metadata snapshot" in cluster.broker_log(paused))
    wait_until(f"broker {paused} to be back", lambda: paused in live_brokers(cluster, leader))
    assert retention_seen_by(cluster, paused, kept[1]) == str(7_200_000 + 79)
    wait_until(f"broker {paused} to delete the logs of the topic deleted meanwhile",
               lambda: not any(path.exists() for path in doomed_logs))


def alter_rounds(admin: AdminClient, topics: list[str], start: int, stop: int) -> None:
    for n in range(start, stop):
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
            ConfigEntry("retention.ms", str(7_200_000 + n),
                        incremental_operation=AlterConfigOpType.SET)]) for t in topics]
        for future in admin.incremental_alter_configs(resources).values():
            future.result(timeout=30)


def last_log_offset(cluster: ClusterProcess, node: int) -> int:
    directory = Path(cluster.broker(node)["log_dir"]) / "__cluster_metadata-0"
    lines = (directory / "raft.jsonl").read_bytes().splitlines()
    return int(json.loads(lines[-1])["offset"]) if lines else first_log_offset(cluster, node)
