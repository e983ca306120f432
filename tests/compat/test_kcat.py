"""Debian's kcat (librdkafka 2.0.x): seeks, and a balanced consumer group across a restart."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess
from tests.compat.clients import Message, confluent_produce, new_topic, sample_messages


def kcat(*args: str, timeout: float = 60) -> list[dict[str, Any]]:
    result = subprocess.run(["kcat", *args, "-J"], check=True, timeout=timeout,
                            capture_output=True)
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_kcat_seeks_by_offset_and_by_timestamp(kafka_bootstrap: str) -> None:
    topic = new_topic("kcat-seek")
    base = int(time.time() * 1000) - 90_000
    confluent_produce(kafka_bootstrap, topic, sample_messages(30, base_ts=base))

    by_offset = kcat("-C", "-b", kafka_bootstrap, "-t", topic, "-p", "0", "-o", "12",
                     "-c", "3", "-e")
    by_time = kcat("-C", "-b", kafka_bootstrap, "-t", topic, "-p", "0", "-o",
                   f"s@{base + 10 * 20 - 3}", "-c", "2", "-e")

    assert [r["offset"] for r in by_offset] == [12, 13, 14]
    assert [r["offset"] for r in by_time] == [20, 21]
    assert by_time[0]["ts"] == base + 200


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    finally:
        consumer.close()


def test_kcat_group_commits_and_resumes_after_a_broker_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"group.min.session.timeout.ms": "1000"})
    topic, group = new_topic("kcat-group"), new_topic("kcat-g")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    first = [Message(None, f"first-{p}-{i}".encode(), partition=p)
             for p in range(3) for i in range(10)]
    confluent_produce(broker.bootstrap, topic, first)

    group_args = ["-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                  "-X", "session.timeout.ms=6000"]
    got = kcat(*group_args, "-c", "30", topic)
    assert sorted(r["payload"] for r in got) == sorted(m.value.decode() for m in first
                                                       if m.value)
    assert committed(broker.bootstrap, group, topic, 3) == {0: 10, 1: 10, 2: 10}

    broker.restart()
    second = [Message(None, f"second-{p}".encode(), partition=p) for p in range(3)]
    confluent_produce(broker.bootstrap, topic, second)
    resumed = kcat(*group_args, "-c", "3", topic)

    assert sorted(r["payload"] for r in resumed) == ["second-0", "second-1", "second-2"]
    assert committed(broker.bootstrap, group, topic, 3) == {0: 11, 1: 11, 2: 11}


def test_three_kcat_members_rebalance_share_partitions_and_commit(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"group.min.session.timeout.ms": "1000"})
    topic, group = new_topic("kcat-three"), new_topic("kcat-g3")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)

    def owned() -> list[list[int]]:
        described = admin.describe_consumer_groups([group])[group].result(10)
        return sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                      for m in described.members)

    def shared_by(n: int) -> bool:
        """Every partition owned exactly once, by n members that each own some."""
        owners = owned()
        owned_partitions = sorted(p for partitions in owners for p in partitions)
        return len(owners) == n and all(owners) and owned_partitions == [0, 1, 2]

    members = []
    for n in (1, 2, 3):
        members.append(subprocess.Popen(
            ["kcat", "-b", broker.bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
             "-X", "session.timeout.ms=6000", "-c", "10", "-J", topic],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 30
        while not shared_by(n):
            assert time.monotonic() < deadline, f"{n} member(s) never shared: {owned()}"
            time.sleep(0.2)

    sent = [Message(None, f"m-{p}-{i}".encode(), partition=p) for p in range(3) for i in range(10)]
    confluent_produce(broker.bootstrap, topic, sent)
    outputs = [m.communicate(timeout=60)[0] for m in members]

    per_member = [[json.loads(line) for line in out.splitlines()] for out in outputs]
    assert sorted(len(records) for records in per_member) == [10, 10, 10]
    assert all(len({r["partition"] for r in records}) == 1 for records in per_member)
    assert committed(broker.bootstrap, group, topic, 3) == {0: 10, 1: 10, 2: 10}
