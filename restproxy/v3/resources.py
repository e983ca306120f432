"""v3 JSON shapes: Confluent's resources with kind, metadata.self and related links."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework.request import Request

from clusterclient import ConfigEntry, PartitionMetadata, TopicMetadata


class Links:
    """Absolute URLs and resource names of one cluster, for one request's host."""

    def __init__(self, request: Request, cluster_id: str) -> None:
        root = request.build_absolute_uri(reverse("restproxy:root"))
        self.base = f"{root}v3/clusters"
        self.cluster_id = cluster_id

    def url(self, *parts: object) -> str:
        return "/".join([self.base, self.cluster_id, *(str(p) for p in parts)]).rstrip("/")

    def crn(self, *pairs: tuple[str, object]) -> str:
        tail = "".join(f"/{kind}={name}" for kind, name in pairs)
        return f"crn:///kafka={self.cluster_id}{tail}"

    def related(self, *parts: object) -> dict[str, str]:
        return {"related": self.url(*parts)}

    def resource(self, kind: str, path: tuple[object, ...],
                 crn: tuple[tuple[str, object], ...], **fields: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "metadata": {"self": self.url(*path), "resource_name": self.crn(*crn)},
            "cluster_id": self.cluster_id,
            **fields,
        }

    def collection(self, kind: str, path: tuple[object, ...],
                   data: list[dict[str, Any]]) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"self": self.url(*path), "next": None}, "data": data}


def cluster(links: Links, controller_id: int) -> dict[str, Any]:
    return {
        "kind": "KafkaCluster",
        "metadata": {"self": links.url(), "resource_name": links.crn()},
        "cluster_id": links.cluster_id,
        "controller": links.related("brokers", controller_id),
        "acls": links.related("acls"),
        "brokers": links.related("brokers"),
        "broker_configs": links.related("broker-configs"),
        "consumer_groups": links.related("consumer-groups"),
        "topics": links.related("topics"),
        "partition_reassignments": links.related("topics", "-", "partitions", "-",
                                                 "reassignment"),
    }


def broker(links: Links, broker_id: int, host: str, port: int) -> dict[str, Any]:
    return links.resource(
        "KafkaBroker", ("brokers", broker_id), (("broker", broker_id),),
        broker_id=broker_id, host=host, port=port, rack=None,
        configs=links.related("brokers", broker_id, "configs"),
        partition_replicas=links.related("brokers", broker_id, "partition-replicas"),
    )


def topic(links: Links, metadata: TopicMetadata) -> dict[str, Any]:
    name = metadata.name
    return links.resource(
        "KafkaTopic", ("topics", name), (("topic", name),),
        topic_name=name, is_internal=metadata.internal,
        replication_factor=metadata.replication_factor,
        partitions_count=len(metadata.partitions),
        partitions=links.related("topics", name, "partitions"),
        configs=links.related("topics", name, "configs"),
        partition_reassignments=links.related("topics", name, "partitions", "-",
                                              "reassignment"),
        authorized_operations=[],
    )


def config(links: Links, entry: ConfigEntry, owner: tuple[str, object]) -> dict[str, Any]:
    kind, name = owner
    if kind == "topic":
        path: tuple[object, ...] = ("topics", name, "configs", entry.name)
        extra: dict[str, Any] = {"topic_name": name}
        kind_name = "KafkaTopicConfig"
    else:
        path, extra, kind_name = (("brokers", name, "configs", entry.name),
                                  {"broker_id": int(str(name))}, "KafkaBrokerConfig")
    synonyms = [{"name": s.name, "value": s.value, "source": s.source} for s in entry.synonyms]
    return links.resource(
        kind_name, path, ((kind, name), ("config", entry.name)), **extra,
        name=entry.name, value=None if entry.is_sensitive else entry.value,
        is_default=bool(entry.is_default), is_read_only=bool(entry.is_read_only),
        is_sensitive=bool(entry.is_sensitive), source=entry.source, synonyms=synonyms,
    )


def partition(links: Links, topic_name: str, p: PartitionMetadata) -> dict[str, Any]:
    n = p.partition
    return links.resource(
        "KafkaPartition", ("topics", topic_name, "partitions", n),
        (("topic", topic_name), ("partition", n)),
        topic_name=topic_name, partition_id=n,
        leader=links.related("topics", topic_name, "partitions", n, "replicas", p.leader),
        replicas=links.related("topics", topic_name, "partitions", n, "replicas"),
        reassignment=links.related("topics", topic_name, "partitions", n, "reassignment"),
    )


def replica(links: Links, topic_name: str, p: PartitionMetadata, broker_id: int
            ) -> dict[str, Any]:
    n = p.partition
    return links.resource(
        "KafkaReplica", ("topics", topic_name, "partitions", n, "replicas", broker_id),
        (("topic", topic_name), ("partition", n), ("replica", broker_id)),
        topic_name=topic_name, partition_id=n, broker_id=broker_id,
        is_leader=broker_id == p.leader, is_in_sync=broker_id in p.isr,
        broker=links.related("brokers", broker_id),
    )
