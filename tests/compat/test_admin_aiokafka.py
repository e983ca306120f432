"""aiokafka's AIOKafkaAdminClient against the built-in broker.

aiokafka stays on old versions (CreateTopics v3, CreatePartitions v1, DescribeConfigs v2,
AlterConfigs v1, DeleteRecords v2): the pre-flexible encodings of the same handlers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.structs import TopicPartition

from tests.compat.clients import aiokafka_produce, new_topic, sample_messages

DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG = 5, 1


@pytest.fixture
async def admin(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await client.start()
    yield client
    await client.close()


async def topic_configs(admin: AIOKafkaAdminClient, topic: str) -> dict[str, Any]:
    [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    [resource] = response.resources
    assert resource[0] == 0, resource
    return {entry[0]: entry for entry in resource[4]}


async def test_it_creates_and_deletes_topics(admin: AIOKafkaAdminClient) -> None:
    topic = new_topic("aio-topic")

    created = await admin.create_topics([NewTopic(topic, 2, 1)])
    again = await admin.create_topics([NewTopic(topic, 2, 1)])

    assert [(t[0], t[1]) for t in created.topic_errors] == [(topic, 0)]
    assert [(t[1], t[2]) for t in again.topic_errors] == [(36, f"Topic '{topic}' already exists.")]
    assert topic in await admin.list_topics()
    deleted = await admin.delete_topics([topic])
    assert [tuple(t) for t in deleted.topic_error_codes] == [(topic, 0)]
    assert topic not in await admin.list_topics()


async def test_validate_only_creates_nothing(admin: AIOKafkaAdminClient) -> None:
    topic = new_topic("aio-validate")

    response = await admin.create_topics([NewTopic(topic, 1, 1)], validate_only=True)

    assert [t[1] for t in response.topic_errors] == [0]
    assert topic not in await admin.list_topics()


async def test_it_creates_partitions(admin: AIOKafkaAdminClient) -> None:
    topic = new_topic("aio-parts")
    await admin.create_topics([NewTopic(topic, 1, 1)])

    response = await admin.create_partitions({topic: NewPartitions(2)})

    assert [(t[0], t[1]) for t in response.topic_errors] == [(topic, 0)]
    metadata = await admin.describe_topics([topic])
    assert len(metadata[0]["partitions"]) == 2


async def test_it_describes_and_alters_configs(admin: AIOKafkaAdminClient) -> None:
    topic = new_topic("aio-configs")
    await admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"retention.ms": "1000"})])
    configs = await topic_configs(admin, topic)
    assert (configs["retention.ms"][1], configs["retention.ms"][3]) == \
        ("1000", DYNAMIC_TOPIC_CONFIG)
    assert (configs["segment.bytes"][1], configs["segment.bytes"][3]) == \
        ("1073741824", DEFAULT_CONFIG)

    [response] = await admin.alter_configs([ConfigResource(
        ConfigResourceType.TOPIC, topic, configs={"cleanup.policy": "compact"})])

    assert [r[0] for r in response.resources] == [0]
    configs = await topic_configs(admin, topic)
    assert configs["cleanup.policy"][1] == "compact"
    assert configs["retention.ms"][1] == "604800000"  # AlterConfigs replaced the whole set


async def test_it_deletes_records(admin: AIOKafkaAdminClient, kafka_bootstrap: str) -> None:
    topic = new_topic("aio-delrec")
    await admin.create_topics([NewTopic(topic, 1, 1)])
    # aiokafka_produce runs its own event loop, so it cannot run on this one.
    await asyncio.to_thread(aiokafka_produce, kafka_bootstrap, topic, sample_messages(5))

    low = await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(3)})

    assert low == {TopicPartition(topic, 0): 3}
