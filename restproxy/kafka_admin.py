"""Cluster reads through the AdminClient: offsets, configs, groups (the wrapper's admin half)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec

from . import errors
from .client import gateway

T = TypeVar("T")
TIMEOUT = 15.0


def result(future: Future[T], topic: str = "") -> T:
    try:
        return future.result(TIMEOUT)
    except KafkaException as exc:
        raise errors.from_kafka(exc, topic) from exc
    except TimeoutError as exc:
        raise errors.kafka_unavailable("request timed out") from exc


def offsets(topic: str, partitions: list[int], spec: OffsetSpec) -> dict[int, int]:
    if not partitions:
        return {}
    futures = gateway().admin.list_offsets(
        {TopicPartition(topic, p): spec for p in partitions}, request_timeout=TIMEOUT
    )
    return {tp.partition: result(f, topic).offset for tp, f in futures.items()}


def watermarks(topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
    """(earliest, latest) offset of each partition."""
    earliest = offsets(topic, partitions, OffsetSpec.earliest())
    latest = offsets(topic, partitions, OffsetSpec.latest())
    return {p: (earliest[p], latest[p]) for p in partitions}


def describe_configs(resource_type: Any, name: str) -> list[Any]:
    """Config entries of a topic or broker, sorted by name."""
    resource = ConfigResource(resource_type, name)
    futures = gateway().admin.describe_configs([resource], request_timeout=TIMEOUT)
    entries = result(futures[resource], name if resource_type == "topic" else "")
    return sorted(entries.values(), key=lambda e: e.name)


def topic_configs(topic: str) -> list[Any]:
    return describe_configs(ConfigResource.Type.TOPIC, topic)


def broker_configs(broker_id: int) -> list[Any]:
    return describe_configs(ConfigResource.Type.BROKER, str(broker_id))


def list_groups() -> list[Any]:
    listing = result(gateway().admin.list_consumer_groups(request_timeout=TIMEOUT))
    return sorted(listing.valid, key=lambda g: g.group_id)


def describe_group(group_id: str) -> Any:
    futures = gateway().admin.describe_consumer_groups([group_id], request_timeout=TIMEOUT)
    return result(futures[group_id])


def group_offsets(group_id: str) -> list[TopicPartition]:
    futures = gateway().admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group_id)], request_timeout=TIMEOUT
    )
    return list(result(futures[group_id]).topic_partitions or [])
