"""Metadata snapshots on a real broker: thousands of records written by a real admin
client, a restart that rebuilds the same image from the latest snapshot and the log's
tail, and the log before the snapshots gone from disk."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from brokercore.broker import Broker
from brokercore.config import BrokerConfig
from brokercore.controller.image import Record

TOPICS = [f"snap-{i}" for i in range(10)]
ROUNDS = 100  # each alters two configs of every topic: 2,000 config records


def _config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig({
        "node.id": "1", "log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0",
        "metadata.log.max.record.bytes.between.snapshots": "50000",
    })


def _write_metadata(bootstrap: str) -> None:
    """Topics, then many rounds of config changes, as an operator's tool makes them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 20, 1) for t in TOPICS]).values():
        future.result(timeout=30)
    for n in range(ROUNDS):
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[
            ConfigEntry("retention.ms", str(86_400_000 + n),
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", str(3_600_000 + n),
                        incremental_operation=AlterConfigOpType.SET),
        ]) for t in TOPICS]
        for future in admin.incremental_alter_configs(resources).values():
            future.result(timeout=30)


def _first_log_offset(directory: Path) -> int:
    with open(directory / "raft.jsonl", "rb") as f:
        return int(json.loads(f.readline())["offset"])


async def test_a_restart_rebuilds_the_same_image_from_the_snapshot_and_the_tail(
        tmp_path: Path) -> None:
    broker = Broker(_config(tmp_path))
    await broker.start()
    try:
        await asyncio.to_thread(_write_metadata, f"127.0.0.1:{broker.advertised.port}")
        expected = broker.image.records()
        raft = broker.controller.quorum.raft
        assert raft is not None and raft.end_offset > 2000
    finally:
        await broker.stop()

    directory = tmp_path / "__cluster_metadata-0"
    snapshots = sorted(directory.glob("*.checkpoint"))
    assert len(snapshots) == 2  # the latest two are kept, the log from the older one
    assert _first_log_offset(directory) == int(snapshots[0].name.split("-")[0]) > 0

    restarted = Broker(_config(tmp_path))
    quorum = restarted.controller.quorum
    replayed: list[int] = []
    apply = quorum.apply_hook

    def counting(offset: int, record: Record) -> None:
        replayed.append(offset)
        apply(offset, record)

    quorum.apply_hook = counting
    await restarted.controller.start()  # replay only: no registration, no new records
    try:
        raft = quorum.raft
        assert raft is not None and raft.storage.snapshot is not None
        latest = raft.storage.snapshot.end_offset
        assert latest == int(snapshots[1].name.split("-")[0])
        assert min(replayed, default=latest) >= latest  # nothing the snapshot holds
        assert restarted.image.records() == expected
        assert restarted.image.topics["snap-3"].configs == {
            "retention.ms": str(86_400_000 + ROUNDS - 1), "segment.ms": str(3_600_000 + ROUNDS - 1)}
    finally:
        await restarted.controller.stop()
