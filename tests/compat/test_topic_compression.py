"""Topic `compression.type` with real clients: the broker recompresses, clients read back."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient
from kafka.protocol.consumer import FetchRequest

from brokercore.log.records import RecordBatchHeader
from tests.brokercore.wire import WireClient
from tests.compat.clients import (
    CONSUMERS,
    Message,
    confluent_produce,
    new_topic,
    sample_messages,
)
from tests.compat.test_admin_config_effects import create, set_configs

CODEC_OF = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
READERS = ["confluent", "kafka-python", "aiokafka"]


def stored_codecs(bootstrap: str, topic: str) -> list[int]:
    """The codec of every batch the broker serves, read off a raw Fetch."""
    part = FetchRequest.FetchTopic.FetchPartition
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="", cluster_id=None,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 24)])])
    with WireClient(bootstrap) as client:
        response = client.request(request, version=11)
    data = bytes(response.responses[0].partitions[0].records)
    codecs, position = [], 0
    while position < len(data):
        header = RecordBatchHeader.unpack(data, position)
        codecs.append(header.codec)
        position += header.size
    return codecs


def comparable(messages: list[Message]) -> list[tuple[object, ...]]:
    return [(m.offset, m.key, m.value, m.headers, m.timestamp) for m in messages]


@pytest.mark.parametrize("compression", ["zstd", "uncompressed", "snappy"])
def test_each_client_reads_back_a_topic_the_broker_recompressed(
    kafka_bootstrap: str, compression: str,
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = new_topic(f"recompress-{compression}")
    create(admin, topic, compression_type=compression)
    sent = sample_messages(40)
    sent_codec = "lz4" if compression == "uncompressed" else "gzip"
    # Idempotent: the recompressed batches keep producer id, epoch and sequence, so the
    # producer's next batches are in sequence.
    confluent_produce(kafka_bootstrap, topic, sent[:20], sent_codec, **{"enable.idempotence": True})
    confluent_produce(kafka_bootstrap, topic, sent[20:], sent_codec, **{"enable.idempotence": True})

    codecs = stored_codecs(kafka_bootstrap, topic)
    assert codecs and set(codecs) == {CODEC_OF[compression]}
    expected = [(offset, m.key, m.value, m.headers, m.timestamp)
                for offset, m in enumerate(sent)]
    for reader in READERS:
        assert comparable(CONSUMERS[reader](kafka_bootstrap, topic, len(sent))) == expected, reader


def test_a_changed_topic_codec_takes_effect_on_the_next_batches(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = new_topic("recompress-change")
    create(admin, topic)
    sent = sample_messages(30)
    confluent_produce(kafka_bootstrap, topic, sent[:10], "snappy")
    set_configs(admin, topic, compression_type="lz4")
    confluent_produce(kafka_bootstrap, topic, sent[10:20], "snappy")
    set_configs(admin, topic, compression_type="producer")
    confluent_produce(kafka_bootstrap, topic, sent[20:], "zstd")

    codecs = stored_codecs(kafka_bootstrap, topic)
    assert codecs[0] == CODEC_OF["snappy"] and codecs[-1] == CODEC_OF["zstd"]
    assert CODEC_OF["lz4"] in codecs and set(codecs) == {2, 3, 4}
    expected = [(offset, m.key, m.value, m.headers, m.timestamp)
                for offset, m in enumerate(sent)]
    for reader in READERS:
        assert comparable(CONSUMERS[reader](kafka_bootstrap, topic, len(sent))) == expected, reader


def test_an_unknown_codec_is_refused_with_kafkas_message(kafka_bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topic = new_topic("recompress-bad")
    with pytest.raises(Exception, match=r"compression\.type") as refused:
        create(admin, topic, compression_type="brotli")
    assert "INVALID_CONFIG" in str(refused.value)
