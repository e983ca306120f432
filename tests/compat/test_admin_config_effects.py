"""Topic configs changed through the admin APIs take effect on the partition logs at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.protocol.producer import ProduceRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient, record_batch
from tests.brokerproc import BrokerProcess
from tests.compat.clients import new_topic

TIMEOUT = 15


def produce(bootstrap: str, topic: str, records: bytes) -> Any:
    part = ProduceRequest.TopicProduceData.PartitionProduceData
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            part(index=0, records=records)])])
    with WireClient(bootstrap) as client:
        return client.request(request, version=8).responses[0].partition_responses[0]


def set_configs(admin: AdminClient, topic: str, **configs: str) -> None:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    futures = admin.incremental_alter_configs([ConfigResource("topic", topic,
                                                              incremental_configs=entries)])
    for future in futures.values():
        future.result(TIMEOUT)


def create(admin: AdminClient, topic: str, **configs: str) -> None:
    config = {k.replace("_", "."): v for k, v in configs.items()}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(TIMEOUT)


def test_compaction_set_later_refuses_keyless_records(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = new_topic("effect-compact")
    create(admin, topic)
    assert produce(kafka_bootstrap, topic, record_batch([b"v"], key=None)).error_code == 0

    set_configs(admin, topic, cleanup_policy="compact")

    refused = produce(kafka_bootstrap, topic, record_batch([b"v"], key=None))
    assert refused.error_code == ErrorCode.INVALID_RECORD
    assert produce(kafka_bootstrap, topic, record_batch([b"v"], key=b"k")).error_code == 0


def test_max_message_bytes_set_later_refuses_bigger_batches(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = new_topic("effect-max")
    create(admin, topic)
    big = record_batch([b"x" * 4000])
    assert produce(kafka_bootstrap, topic, big).error_code == 0

    set_configs(admin, topic, max_message_bytes="1000")

    assert produce(kafka_bootstrap, topic, big).error_code == ErrorCode.MESSAGE_TOO_LARGE


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_retention_set_later_deletes_old_segments(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"log.retention.check.interval.ms": "100"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = new_topic("effect-retention")
    create(admin, topic, segment_bytes="600")
    now = int(time.time() * 1000)  # within the default retention.ms
    for _ in range(20):  # one batch each, so that they fill several 600-byte segments
        batch = record_batch([b"x" * 100], timestamp=now)
        assert produce(broker.bootstrap, topic, batch).error_code == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r"})

    def log_start() -> int:
        low, _high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                                    timeout=TIMEOUT)
        return int(low)

    try:
        time.sleep(0.3)
        assert log_start() == 0  # the default retention keeps everything

        set_configs(admin, topic, retention_bytes="1")

        assert wait_for(lambda: log_start() > 0)
    finally:
        consumer.close()
