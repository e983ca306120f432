"""The coordinator's broker settings, through a real broker and client."""

from __future__ import annotations

from collections.abc import Callable

import confluent_kafka
import pytest

from tests.brokerproc import BrokerProcess
from tests.compat.clients import confluent_produce, new_topic, sample_messages


def test_offset_metadata_max_bytes_is_the_brokers_setting(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory({"offset.metadata.max.bytes": "16"})
    topic = new_topic("meta")
    confluent_produce(broker.bootstrap, topic, sample_messages(1))
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                         "group.id": topic, "enable.auto.commit": False})
    try:
        fits = confluent_kafka.TopicPartition(topic, 0, 5, "short")
        [done] = consumer.commit(offsets=[fits], asynchronous=False)
        assert done.error is None
        too_long = confluent_kafka.TopicPartition(topic, 0, 6, "x" * 17)
        with pytest.raises(confluent_kafka.KafkaException) as refused:
            consumer.commit(offsets=[too_long], asynchronous=False)
        assert refused.value.args[0].code() == confluent_kafka.KafkaError.OFFSET_METADATA_TOO_LARGE
        [kept] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=10)
        assert (kept.offset, kept.metadata) == (5, "short")
    finally:
        consumer.close()
