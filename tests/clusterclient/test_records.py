"""RecordReader and produce against a real built-in broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from clusterclient import ClusterRequestError, ClusterUnavailable
from clusterclient.records import RecordReader, produce
from tests.compat.clients import new_topic


def create(bootstrap: str, partitions: int = 2) -> str:
    topic = new_topic("records")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    return topic


def test_it_reads_exactly_the_asked_ranges_with_keys_and_headers(kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap)
    for i in range(10):
        produce(kafka_bootstrap, topic, f"v{i}".encode(), key=f"k{i}".encode(),
                headers=[("h", str(i).encode())], partition=i % 2)
    with RecordReader(kafka_bootstrap) as reader:
        assert reader.partitions(topic) == [0, 1]
        assert reader.watermarks(topic, 0) == (0, 5)
        latest = reader.latest(topic, per_partition=2)
        assert latest == {0: (3, 5), 1: (3, 5)}
        records = reader.read(topic, latest)
        assert sorted((r.partition, r.offset) for r in records) == [(0, 3), (0, 4), (1, 3), (1, 4)]
        middle = reader.read(topic, {0: (1, 3)})
    assert [(r.offset, r.key, r.value, r.headers) for r in middle] == [
        (1, b"k2", b"v2", (("h", b"2"),)), (2, b"k4", b"v4", (("h", b"4"),))]
    assert middle[0].timestamp_type == "CreateTime" and middle[0].timestamp_ms


def test_it_stops_at_the_record_budget(kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap, partitions=1)
    for _ in range(20):
        produce(kafka_bootstrap, topic, b"x" * 100, partition=0)
    with RecordReader(kafka_bootstrap) as reader:
        assert len(reader.read(topic, {0: (0, 20)}, max_records=7)) == 7
        assert len(reader.read(topic, {0: (0, 20)}, max_bytes=250)) == 3


def test_it_finds_offsets_by_timestamp(kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap, partitions=1)
    produce(kafka_bootstrap, topic, b"old", partition=0)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(kafka_bootstrap, topic, b"new", partition=0)
    with RecordReader(kafka_bootstrap) as reader:
        assert reader.offsets_for_time(topic, middle, [0]) == {0: 1}
        assert reader.offsets_for_time(topic, middle + 3_600_000, [0]) == {0: 2}


def test_an_unknown_topic_is_a_request_error(kafka_bootstrap: str) -> None:
    with RecordReader(kafka_bootstrap) as reader, pytest.raises(ClusterRequestError) as caught:
        reader.partitions("no-such-topic-" + new_topic())
    assert caught.value.code_name == "UNKNOWN_TOPIC_OR_PART"


def test_a_dead_cluster_is_unavailable_promptly() -> None:
    with RecordReader("127.0.0.1:1", timeout=1.0) as reader, pytest.raises(ClusterUnavailable):
        reader.partitions("anything")
    with pytest.raises(ClusterUnavailable):
        produce("127.0.0.1:1", "anything", b"x", timeout=1.0)
