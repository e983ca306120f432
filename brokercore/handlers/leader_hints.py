"""KIP-951: a NOT_LEADER_OR_FOLLOWER answer names the current leader, and where to reach it.

Fetch (v16+) and Produce (v10+) carry the leader this broker's metadata image knows of, and
its endpoint, so a client can move on without a Metadata round trip first. As in Kafka,
only live brokers get an endpoint (the controller never leaves a fenced broker leading).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from brokercore.controller.image import MetadataImage
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

# The errors after which a client looks for the leader elsewhere (as Kafka's KafkaApis).
HINTED_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def current_leader(image: MetadataImage, tp: TopicPartition) -> tuple[int, int] | None:
    """(leader id, leader epoch) as the image has them; None for an unknown partition."""
    topic = image.topics.get(tp.topic)
    registration = topic.partitions.get(tp.partition) if topic is not None else None
    if registration is None:
        return None
    return registration.leader, registration.leader_epoch


def node_endpoints(image: MetadataImage, node_ids: Iterable[int], endpoint_class: Any,
                   listener: str) -> list[Any]:
    """The `listener` endpoint of each named broker that is registered and unfenced (those
    Metadata lists), by node id."""
    endpoints = []
    for node_id in sorted(set(node_ids)):
        broker = image.brokers.get(node_id)
        endpoint = broker.endpoint(listener) if broker is not None and not broker.fenced else None
        if broker is not None and endpoint is not None:
            endpoints.append(endpoint_class(node_id=node_id, host=endpoint[0], port=endpoint[1],
                                            rack=broker.rack))
    return endpoints
