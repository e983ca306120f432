"""In process, no sockets: config handlers reconfigure the live partition logs.

The wire tests see the effect of a few configs; this one checks that every altered topic
config lands in the partition's LogConfig, and that validate_only touches nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
)

from brokercore.broker import Broker
from brokercore.config import BrokerConfig
from brokercore.handlers.registry import REGISTRY
from brokercore.protocol.context import RequestContext
from brokercore.protocol.framing import RequestHeader
from brokercore.topic_partition import TopicPartition

TOPIC = 2


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    broker = Broker(BrokerConfig({"node.id": "1", "log.dirs": str(tmp_path),
                                  "listeners": "PLAINTEXT://127.0.0.1:0"}))
    await broker.controller.start()
    await broker.replica_manager.load()
    await broker.controller.register_broker(1, "127.0.0.1", 9092)
    yield broker
    await broker.replica_manager.stop()
    await broker.controller.stop()


async def call(broker: Broker, request: Any, version: int) -> Any:
    api = REGISTRY[int(request.API_KEY)]
    header = RequestHeader(api.key, version, 1, "in-process")
    return await api.handler(broker.parts, RequestContext(header, "test"), request)


async def create(broker: Broker, name: str, validate_only: bool = False) -> None:
    spec = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(timeout_ms=1000, validate_only=validate_only, topics=[spec(
        name=name, num_partitions=2, replication_factor=1, assignments=[], configs=[])])
    [result] = (await call(broker, request, 5)).topics
    assert result.error_code == 0


async def alter(broker: Broker, name: str, configs: dict[str, str],
                validate_only: bool = False) -> None:
    resource = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest(validate_only=validate_only, resources=[resource(
        resource_type=TOPIC, resource_name=name,
        configs=[resource.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    [response] = (await call(broker, request, 1)).responses
    assert response.error_code == 0, response


async def test_altered_configs_reach_every_partition_log(broker: Broker) -> None:
    await create(broker, "t")

    await alter(broker, "t", {"retention.ms": "1234", "retention.bytes": "999",
                              "cleanup.policy": "compact,delete", "segment.bytes": "4096",
                              "max.message.bytes": "2000",
                              "message.timestamp.type": "LogAppendTime"})

    for index in (0, 1):
        config = broker.replica_manager.partitions[TopicPartition("t", index)].log.config
        assert (config.retention_ms, config.retention_bytes, config.segment_bytes,
                config.max_message_bytes, config.message_timestamp_type) == \
            (1234, 999, 4096, 2000, "LogAppendTime")
        assert config.cleanup_policy == frozenset({"compact", "delete"})


async def test_removing_an_override_restores_the_default_on_the_log(broker: Broker) -> None:
    await create(broker, "t")
    await alter(broker, "t", {"retention.ms": "1234"})
    log = broker.replica_manager.partitions[TopicPartition("t", 0)].log

    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(validate_only=False, resources=[resource(
        resource_type=TOPIC, resource_name="t", configs=[resource.AlterableConfig(
            name="retention.ms", config_operation=1, value=None)])])
    await call(broker, request, 1)

    assert log.config.retention_ms == 604800000


async def test_validate_only_writes_no_metadata_and_touches_no_log(broker: Broker) -> None:
    await create(broker, "t")
    records_before = broker.controller.log_end_offset

    await alter(broker, "t", {"retention.ms": "1234"}, validate_only=True)
    await create(broker, "u", validate_only=True)
    grow = CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=5, assignments=None)
    [grown] = (await call(broker, CreatePartitionsRequest(
        topics=[grow], timeout_ms=1000, validate_only=True), 3)).results
    assert grown.error_code == 0

    assert broker.replica_manager.partitions[TopicPartition("t", 0)].log.config.retention_ms \
        == 604800000
    assert broker.controller.log_end_offset == records_before
    assert set(broker.replica_manager.partitions) == \
        {TopicPartition("t", 0), TopicPartition("t", 1)}


async def test_producer_id_expiration_changed_cluster_wide_reaches_every_log(
    broker: Broker,
) -> None:
    """Kafka's `producer.id.expiration.ms` is a dynamic broker config; each log reads it at
    its next expiration check. A value below 1 is refused, as Kafka's atLeast(1)."""
    await create(broker, "t")
    resource = AlterConfigsRequest.AlterConfigsResource

    async def set_cluster_wide(value: str) -> int:
        request = AlterConfigsRequest(validate_only=False, resources=[resource(
            resource_type=4, resource_name="", configs=[resource.AlterableConfig(
                name="producer.id.expiration.ms", value=value)])])
        [response] = (await call(broker, request, 1)).responses
        return int(response.error_code)

    assert await set_cluster_wide("0") == 40  # INVALID_CONFIG
    assert await set_cluster_wide("5000") == 0
    for index in (0, 1):
        config = broker.replica_manager.partitions[TopicPartition("t", index)].log.config
        assert config.producer_id_expiration_ms == 5000
