"""DeleteRecords, ListOffsets, DescribeCluster, DescribeLogDirs and DescribeProducers on the
wire."""

from __future__ import annotations

from typing import Any

import kafka
import pytest
from kafka.protocol.admin import (
    DeleteRecordsRequest,
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.compat.clients import confluent_produce, new_topic, sample_messages


@pytest.fixture
def client(kafka_bootstrap: str) -> Any:
    with WireClient(kafka_bootstrap) as wire:
        yield wire


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    """A one-partition topic holding 10 records."""
    name = new_topic("rec")
    confluent_produce(kafka_bootstrap, name, sample_messages(10))
    return name


def delete_records(client: WireClient, topic: str, *offsets: tuple[int, int],
                   version: int = 2) -> list[tuple[int, int, int]]:
    part = DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition
    request = DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name=topic, partitions=[part(partition_index=p, offset=o) for p, o in offsets])])
    [result] = client.request(request, version=version).topics
    return [(p.partition_index, p.error_code, p.low_watermark) for p in result.partitions]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_moves_the_log_start_and_never_back(client: WireClient, topic: str,
                                                           version: int) -> None:
    assert delete_records(client, topic, (0, 3), version=version) == [(0, 0, 3)]
    assert delete_records(client, topic, (0, 1), version=version) == [(0, 0, 3)]
    assert delete_records(client, topic, (0, -1), version=version) == [(0, 0, 10)]


def test_delete_records_errors(client: WireClient, topic: str) -> None:
    assert delete_records(client, topic, (0, 11), (1, 0), (0, -5)) == [
        (0, ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        (0, ErrorCode.OFFSET_OUT_OF_RANGE, -1),
    ]


@pytest.mark.parametrize("version", [1, 3, 4, 10])
def test_list_offsets_answers_each_version_with_its_fields(client: WireClient, topic: str,
                                                           version: int) -> None:
    # The handler answers positional tuples per version (leader_epoch from v4 only).
    part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            part(partition_index=0, current_leader_epoch=-1, timestamp=-2),
            part(partition_index=0, current_leader_epoch=-1, timestamp=-1),
            part(partition_index=1, current_leader_epoch=-1, timestamp=-1)])])
    [answer] = client.request(request, version=version).topics
    epoch = 0 if version >= 4 else -1  # absent before v4: the codec's default
    assert answer.name == topic
    assert [(p.partition_index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
            for p in answer.partitions] == [
        (0, 0, -1, 0, epoch), (0, 0, -1, 10, epoch),
        (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(client: WireClient, kafka_bootstrap: str, version: int) -> None:
    response = client.request(DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=1,
        include_fenced_brokers=False), version=version)

    assert (response.error_code, response.controller_id) == (ErrorCode.NONE, 1)
    assert len(response.cluster_id) == 22
    assert [(b.broker_id, f"{b.host}:{b.port}") for b in response.brokers] == \
        [(1, kafka_bootstrap)]


def test_describe_cluster_has_no_controller_endpoints(client: WireClient) -> None:
    response = client.request(DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=2), version=1)

    assert response.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


@pytest.mark.parametrize("version", [1, 4])
def test_describe_log_dirs_reports_partition_sizes(client: WireClient, topic: str,
                                                   version: int) -> None:
    wanted = DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[0, 5])

    response = client.request(DescribeLogDirsRequest(topics=[wanted]), version=version)

    [log_dir] = response.results
    assert log_dir.error_code == ErrorCode.NONE
    assert log_dir.log_dir.startswith("/")
    [described] = log_dir.topics
    [partition] = described.partitions
    assert (described.name, partition.partition_index, partition.offset_lag) == (topic, 0, 0)
    assert partition.partition_size > 10 * len(b"value-0-")
    if version >= 4:
        assert log_dir.total_bytes >= log_dir.usable_bytes > 0


def test_describe_log_dirs_of_everything(client: WireClient, topic: str) -> None:
    response = client.request(DescribeLogDirsRequest(topics=None), version=2)

    names = {t.name for t in response.results[0].topics}
    assert topic in names


def test_describe_producers_shows_an_idempotent_producer(client: WireClient,
                                                         kafka_bootstrap: str) -> None:
    topic = new_topic("producers")
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap)  # idempotent by default
    for _ in range(3):
        producer.send(topic, b"v", partition=0).get(timeout=30)
    producer.close()
    wanted = DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0, 3])

    [described] = client.request(DescribeProducersRequest(topics=[wanted]), version=0).topics

    ok, missing = described.partitions
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    [state] = ok.active_producers
    assert (state.producer_epoch, state.last_sequence) == (0, 2)
    assert state.producer_id >= 0 and state.last_timestamp > 0
