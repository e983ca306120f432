"""v3 JSON shapes of consumer groups: groups, consumers, assignments, lags."""

from __future__ import annotations

from typing import Any

from clusterclient import ConsumerGroup, GroupMember, TopicPartition

from .resources import Links


def group(links: Links, description: ConsumerGroup) -> dict[str, Any]:
    g = description.group_id
    coordinator = description.coordinator.node_id if description.coordinator else -1
    return links.resource(
        "KafkaConsumerGroup", ("consumer-groups", g), (("consumer-group", g),),
        consumer_group_id=g, is_simple=description.is_simple,
        partition_assignor=description.partition_assignor, state=description.state,
        coordinator=links.related("brokers", coordinator),
        consumers=links.related("consumer-groups", g, "consumers"),
        lag_summary=links.related("consumer-groups", g, "lag-summary"),
    )


def consumer(links: Links, g: str, member: GroupMember) -> dict[str, Any]:
    return links.resource(
        "KafkaConsumer", ("consumer-groups", g, "consumers", member.member_id),
        (("consumer-group", g), ("consumer", member.member_id)),
        consumer_group_id=g, consumer_id=member.member_id,
        instance_id=member.group_instance_id, client_id=member.client_id,
        assignments=links.related("consumer-groups", g, "consumers", member.member_id,
                                  "assignments"),
    )


def assignment(links: Links, g: str, consumer_id: str, tp: TopicPartition) -> dict[str, Any]:
    return links.resource(
        "KafkaConsumerAssignment",
        ("consumer-groups", g, "consumers", consumer_id, "assignments", tp.topic, "partitions",
         tp.partition),
        (("consumer-group", g), ("consumer", consumer_id), ("topic", tp.topic),
         ("partition", tp.partition)),
        consumer_group_id=g, consumer_id=consumer_id, topic_name=tp.topic,
        partition_id=tp.partition,
        partition=links.related("topics", tp.topic, "partitions", tp.partition),
        lag=links.related("consumer-groups", g, "lags", tp.topic, "partitions", tp.partition),
    )


def lag(links: Links, g: str, row: dict[str, Any]) -> dict[str, Any]:
    return links.resource(
        "KafkaConsumerLag",
        ("consumer-groups", g, "lags", row["topic_name"], "partitions", row["partition_id"]),
        (("consumer-group", g), ("lag", row["topic_name"]), ("partition", row["partition_id"])),
        consumer_group_id=g, **row,
    )


def lag_summary(links: Links, g: str, total_lag: int, worst: dict[str, Any] | None
                ) -> dict[str, Any]:
    """`worst` is the lag row of the partition with the largest lag (None without any)."""
    fields: dict[str, Any] = {
        "consumer_group_id": g,
        "max_lag_consumer_id": worst["consumer_id"] if worst else "",
        "max_lag_instance_id": worst["instance_id"] if worst else None,
        "max_lag_client_id": worst["client_id"] if worst else "",
        "max_lag_topic_name": worst["topic_name"] if worst else "",
        "max_lag_partition_id": worst["partition_id"] if worst else 0,
        "max_lag": worst["lag"] if worst else 0,
        "total_lag": total_lag,
    }
    if worst:
        fields["max_lag_consumer"] = links.related(
            "consumer-groups", g, "consumers", worst["consumer_id"])
        fields["max_lag_partition"] = links.related(
            "topics", worst["topic_name"], "partitions", worst["partition_id"])
    return links.resource("KafkaConsumerGroupLagSummary", ("consumer-groups", g, "lag-summary"),
                          (("consumer-group", g), ("lag-summary", g)), **fields)
