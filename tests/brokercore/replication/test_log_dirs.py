"""Several `log.dirs` per broker: placement, identity, restart, DescribeLogDirs, failures."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kafka
import pytest
from kafka.admin import NewTopic

from tests.brokerproc import BrokerProcess
from tests.compat.clients import (
    Message,
    confluent_consume_all,
    confluent_produce,
    new_topic,
)

STORAGE_ERROR = 56  # KAFKA_STORAGE_ERROR


def dirs_of(tmp_path: Path, count: int = 3) -> list[Path]:
    return [tmp_path / f"disk{i}" for i in range(count)]


def start(broker_factory: Callable[..., BrokerProcess], dirs: list[Path]) -> BrokerProcess:
    return broker_factory({"log.dirs": ",".join(map(str, dirs))})


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def describe(bootstrap: str, topic: str | None = None) -> dict[str, Any]:
    """kafka-python's describe_log_dirs, as {dir path: result} for the one broker."""
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        response = admin.describe_log_dirs(None if topic is None else [topic])
    finally:
        admin.close()
    [per_broker] = response
    return {entry["log_dir"]: entry for entry in per_broker["log_dirs"]}


def placed(result: dict[str, Any], topic: str) -> set[int]:
    return {p["partition_index"] for t in result["topics"] if t["name"] == topic
            for p in t["partitions"]}


def produce_to_all(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    confluent_produce(bootstrap, topic, [
        Message(key=None, value=f"{p}-{i}".encode(), partition=p)
        for p in range(partitions) for i in range(count)])


def test_partitions_spread_over_three_dirs_and_are_found_after_a_restart(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path)
    broker = start(broker_factory, dirs)
    topic = new_topic("spread")
    create_topic(broker.bootstrap, topic, 6)
    produce_to_all(broker.bootstrap, topic, 6, 5)

    before = describe(broker.bootstrap, topic)
    assert set(before) == {str(d.resolve()) for d in dirs}
    assert sorted(len(placed(r, topic)) for r in before.values()) == [2, 2, 2]
    ids = {(d / "meta.properties").read_text() for d in dirs}
    assert len(ids) == 3 and all("directory.id=" in text for text in ids)
    for result in before.values():
        assert result["error_code"] == 0
        assert result["total_bytes"] >= result["usable_bytes"] > 0

    broker.restart()

    after = describe(broker.bootstrap, topic)
    assert {d: placed(r, topic) for d, r in after.items()} == \
        {d: placed(r, topic) for d, r in before.items()}
    assert {(d / "meta.properties").read_text() for d in dirs} == ids
    for p in range(6):
        values = [m.value for m in confluent_consume_all(broker.bootstrap, topic, p)]
        assert values == [f"{p}-{i}".encode() for i in range(5)]


def test_a_partition_in_two_dirs_refuses_to_start(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path, 2)
    broker = start(broker_factory, dirs)
    topic = new_topic("dup")
    create_topic(broker.bootstrap, topic, 1)
    produce_to_all(broker.bootstrap, topic, 1, 3)
    broker.stop()
    [source] = [d / f"{topic}-0" for d in dirs if (d / f"{topic}-0").exists()]
    [other] = [d for d in dirs if d != source.parent]
    shutil.copytree(source, other / source.name)

    with pytest.raises(RuntimeError, match=f"partition {topic}-0 is in two log dirs"):
        broker.start()


def test_an_unusable_dir_is_offline_and_the_others_serve(
        broker_factory: Callable[..., BrokerProcess], tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path)
    dirs[2].parent.mkdir(parents=True, exist_ok=True)
    dirs[2].write_text("a file where a directory should be")
    broker = start(broker_factory, dirs)
    topic = new_topic("offline")
    create_topic(broker.bootstrap, topic, 4)
    produce_to_all(broker.bootstrap, topic, 4, 2)

    results = describe(broker.bootstrap, topic)

    bad = results[str(dirs[2].resolve())]
    assert bad["error_code"] == STORAGE_ERROR and bad["topics"] == []
    assert sorted(len(placed(results[str(d.resolve())], topic)) for d in dirs[:2]) == [2, 2]
