"""Debian's kcat (librdkafka 2.0.x) lists what the admin APIs created."""

from __future__ import annotations

import json
import subprocess

from confluent_kafka.admin import AdminClient, NewTopic

from tests.compat.clients import new_topic


def test_kcat_lists_a_created_topic_with_leaders_and_the_broker(kafka_bootstrap: str) -> None:
    topic = new_topic("kcat-list")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)

    listed = subprocess.run(["kcat", "-L", "-J", "-b", kafka_bootstrap, "-t", topic],
                            check=True, timeout=30, capture_output=True)

    metadata = json.loads(listed.stdout)
    assert [b["id"] for b in metadata["brokers"]] == [1]
    assert metadata["controllerid"] == 1
    [described] = metadata["topics"]
    assert described["topic"] == topic
    assert [(p["partition"], p["leader"]) for p in described["partitions"]] == \
        [(0, 1), (1, 1), (2, 1)]
