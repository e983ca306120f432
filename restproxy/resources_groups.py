"""v3 JSON shapes of consumer groups: groups, consumers, assignments, lags."""

from __future__ import annotations

from typing import Any

from .resources import Links


def group(links: Links, description: Any) -> dict[str, Any]:
    g = description.group_id
    state = getattr(description.state, "name", str(description.state))
    coordinator = description.coordinator.id if description.coordinator else -1
    return links.resource(
        "KafkaConsumerGroup", ("consumer-groups", g), (("consumer-group", g),),
        consumer_group_id=g, is_simple=bool(description.is_simple_consumer_group),
        partition_assignor=description.partition_assignor or "", state=state.upper(),
        coordinator=links.related("brokers", coordinator),
        consumers=links.related("consumer-groups", g, "consumers"),
        lag_summary=links.related("consumer-groups", g, "lag-summary"),
    )


def consumer(links: Links, g: str, member: Any) -> dict[str, Any]:
    return links.resource(
        "KafkaConsumer", ("consumer-groups", g, "consumers", member.member_id),
        (("consumer-group", g), ("consumer", member.member_id)),
        consumer_group_id=g, consumer_id=member.member_id,
        instance_id=member.group_instance_id, client_id=member.client_id,
        assignments=links.related("consumer-groups", g, "consumers", member.member_id,
                                  "assignments"),
    )


def assignment(links: Links, g: str, consumer_id: str, tp: Any) -> dict[str, Any]:
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


def lag_summary(links: Links, g: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    worst = max(rows, key=lambda r: r["lag"], default=None)
    fields: dict[str, Any] = {
        "consumer_group_id": g,
        "max_lag_consumer_id": worst["consumer_id"] if worst else "",
        "max_lag_instance_id": worst["instance_id"] if worst else None,
        "max_lag_client_id": worst["client_id"] if worst else "",
        "max_lag_topic_name": worst["topic_name"] if worst else "",
        "max_lag_partition_id": worst["partition_id"] if worst else 0,
        "max_lag": worst["lag"] if worst else 0,
        "total_lag": sum(r["lag"] for r in rows),
    }
    if worst:
        fields["max_lag_consumer"] = links.related(
            "consumer-groups", g, "consumers", worst["consumer_id"])
        fields["max_lag_partition"] = links.related(
            "topics", worst["topic_name"], "partitions", worst["partition_id"])
    return links.resource("KafkaConsumerGroupLagSummary", ("consumer-groups", g, "lag-summary"),
                          (("consumer-group", g), ("lag-summary", g)), **fields)
