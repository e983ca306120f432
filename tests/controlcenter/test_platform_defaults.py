"""What a user expects of the platform's three-broker cluster: replicated topics (auto-created
ones and __consumer_offsets included), every open port in the endpoint table, and preferred
leadership back soon after a broker returns."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.compat.clients import new_topic
from tests.controlcenter.test_platform import is_listening, platform, run_printed, wait_for_output

T = TypeVar("T")
BROKER_ROW = re.compile(r"Broker (\d)\s+Kafka 127\.0\.0\.1:(\d+), controller :(\d+), "
                        r"metrics (http://127\.0\.0\.1:(\d+)/metrics)")


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = 60) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def replicas(admin: AdminClient, topic: str) -> list[int] | None:
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return None
    return sorted({len(p.replicas) for p in found.partitions.values()})


def preferred_led(admin: AdminClient, topic: str) -> bool:
    parts = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    return all(p.leader == p.replicas[0] for p in parts)


@pytest.mark.slow
def test_the_platform_cluster_replicates_lists_its_ports_and_rebalances(tmp_path: Path) -> None:
    proc = platform(tmp_path)
    try:
        text = "".join(wait_for_output(proc))
        bootstrap = re.search(r"Kafka bootstrap\s+(\S+)", text).group(1)  # type: ignore[union-attr]
        rows = BROKER_ROW.findall(text)
        assert [row[0] for row in rows] == ["1", "2", "3"], text
        for _node, kafka, controller, _url, metrics in rows:
            assert all(is_listening(int(p)) for p in (kafka, controller, metrics)), text

        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = new_topic("auto-created")
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        producer.produce(topic, b"hello")
        assert producer.flush(30) == 0
        assert wait_until(f"{topic} to exist", lambda: replicas(admin, topic)) == [3]
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(10)
        assert configs["min.insync.replicas"].value == "2"

        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": new_topic("group"),
            "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        message = wait_until("a record", lambda: consumer.poll(1.0))
        consumer.commit(message=message, asynchronous=False)
        consumer.close()
        assert replicas(admin, "__consumer_offsets") == [3]

        # The failover commands the platform prints, whatever module runs the cluster.
        printed = [re.search(r"-m \w+ (?:cluster )?(\w+(?: \d)?)\s+--data-dir", line)
                   for line in text.splitlines()]
        commands = {found[1]: line.split("#")[0].strip()
                    for found, line in zip(printed, text.splitlines(), strict=True) if found}
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        run_printed(commands["kill 2"].replace(" 2 ", f" {leader} "))
        wait_until("leadership to move", lambda: not preferred_led(admin, topic))
        run_printed(commands["start 2"].replace(" 2 ", f" {leader} "))
        wait_until("the preferred leader to come back", lambda: preferred_led(admin, topic))
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=90)[0]
    assert proc.returncode == 0, output
