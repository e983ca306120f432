"""The overview page: a user's own topics before the internal ones."""

from __future__ import annotations

import re
import uuid
from typing import Any

import confluent_kafka
from django.test import Client


def test_the_overview_lists_internal_topics_last(kafka_bootstrap: str, settings: Any) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap
    topic = f"aaa-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"v")
    producer.flush(10)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap,
                                         "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    page = Client().get("/").content.decode()
    names = re.findall(r'<th scope="rowgroup"[^>]*>([^<]+)</th>', page)
    assert topic in names and "__consumer_offsets" in names, names
    internal = [n.startswith("__") for n in names]
    assert internal == sorted(internal), names
