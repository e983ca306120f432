"""What Fetch and Produce tell a client about leadership: KIP-951's current leader and its
endpoint on NOT_LEADER_OR_FOLLOWER, and KIP-320's diverging epoch after a failover."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import record_batch

from .harness import Client, Cluster

TOPIC = "hints"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    started = await Cluster(tmp_path, 2, {"replica.lag.time.max.ms": "600000"}).start()
    yield started
    await started.stop()


async def fetch(client: Client, version: int, offset: int = 0, last_fetched_epoch: int = -1,
                topic_id: str | None = None) -> Any:
    """By name, or from v13 by topic id."""
    topic = FetchRequest.FetchTopic
    wanted = topic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=offset,
        last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=2**20)
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=2**20, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
        topics=[topic(topic=TOPIC, topic_id=uuid.UUID(topic_id) if topic_id else None,
                      partitions=[wanted])])
    return await client.connection.request(request, version)


async def produce(client: Client, version: int) -> Any:
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        data(name=TOPIC, partition_data=[data.PartitionProduceData(
            index=0, records=record_batch([b"v"]))])])
    return await client.connection.request(request, version)


async def test_a_follower_names_the_leader_and_its_endpoint(cluster: Cluster) -> None:
    topic_id = await cluster.create_topic(TOPIC, [1, 2])
    leader_port = cluster.nodes[1].server.port
    client = await Client.to(cluster.nodes[2])

    for response in (await fetch(client, 16, topic_id=topic_id), await produce(client, 11),
                     await produce(client, 12)):
        [topic] = response.responses
        [answer] = getattr(topic, "partitions", None) or topic.partition_responses
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (1, 0)
        assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [
            (1, "127.0.0.1", leader_port)]
    client.close()


async def test_fetch_names_no_leader_before_v16(cluster: Cluster) -> None:
    """v12-15 have the field but no endpoints, and Kafka leaves it empty there: kafka-python
    (Fetch v12) took a hint naming a broker missing from its metadata, fetched from that
    node id and raised UnknownBrokerIdError out of `poll`."""
    topic_id = await cluster.create_topic(TOPIC, [1, 2])
    client = await Client.to(cluster.nodes[2])
    for version in (12, 13, 14, 15):
        response = await fetch(client, version, topic_id=topic_id if version >= 13 else None)
        [answer] = response.responses[0].partitions
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert answer.current_leader is None  # the tagged field left out, as its default
        assert not response.node_endpoints
    client.close()


async def test_a_reader_of_the_old_leaders_lost_tail_is_told_where_to_truncate(
    cluster: Cluster,
) -> None:
    await cluster.create_topic(TOPIC, [1, 2])
    old = await Client.to(cluster.nodes[1])
    assert (await old.produce(TOPIC, record_batch([b"a", b"b"]))).error_code == 0
    await cluster.stop_node(2)
    assert (await old.produce(TOPIC, record_batch([b"lost"]), acks=1)).error_code == 0
    old.close()
    await cluster.stop_node(1)
    await cluster.restart_node(2)
    cluster.change_leader(TOPIC, 2, isr=[2])
    new = await Client.to(cluster.nodes[2])
    assert (await new.produce(TOPIC, record_batch([b"c", b"d"]), acks=1)).error_code == 0

    # It read offsets 0-2 in epoch 0 from the old leader; the new one ended epoch 0 at 2.
    [answer] = (await fetch(new, 12, offset=3, last_fetched_epoch=0)).responses[0].partitions
    assert answer.error_code == ErrorCode.NONE and not answer.records
    assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (0, 2)
    [caught_up] = (await fetch(new, 12, offset=2, last_fetched_epoch=0)).responses[0].partitions
    assert caught_up.diverging_epoch is None and caught_up.records
    new.close()


async def test_v15_names_the_follower_in_replica_state(cluster: Cluster) -> None:
    topic_id = await cluster.create_topic(TOPIC, [1, 2])
    await cluster.stop_node(2)
    client = await Client.to(cluster.nodes[1])
    assert (await client.produce(TOPIC, record_batch([b"x", b"y"]), acks=1)).error_code == 0
    leader = cluster.nodes[1].partition(TOPIC)
    assert (leader.high_watermark, leader.log_end_offset) == (0, 2)  # follower 2 lags

    as_consumer = await fetch(client, 15, topic_id=topic_id)
    request = FetchRequest(
        replica_state=FetchRequest.ReplicaState(replica_id=2, replica_epoch=-1),
        max_wait_ms=0, min_bytes=0, max_bytes=2**20, isolation_level=0, session_id=0,
        session_epoch=-1, rack_id="", forgotten_topics_data=[],
        topics=[FetchRequest.FetchTopic(topic_id=uuid.UUID(topic_id), partitions=[
            FetchRequest.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=0, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=0, partition_max_bytes=2**20)])])
    as_follower = await client.connection.request(request, 15)

    assert not as_consumer.responses[0].partitions[0].records  # below the high watermark
    assert as_follower.responses[0].partitions[0].records  # to the log end
    assert leader.followers[2].log_end_offset == 0  # its fetch offset, recorded
    client.close()
