"""Metadata (3): brokers, the controller, topics and partitions; auto-creates topics."""

import uuid
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from brokercore.controller.controller import (
    INTERNAL_TOPICS,
    ControllerError,
    NewTopic,
    validate_topic_name,
)
from brokercore.controller.image import TopicImage
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode

Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = Topic.MetadataResponsePartition
ZERO_UUID = uuid.UUID(int=0)


@serves(MetadataRequest, MetadataResponse, min_version=0, max_version=13)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    image = broker.image
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        topics = [_describe(broker, t) for t in sorted(image.topics.values(), key=lambda t: t.name)]
    else:
        auto_create = broker.config.get_bool("auto.create.topics.enable") and (
            ctx.api_version < 4 or request.allow_auto_topic_creation
        )
        topics = [await _lookup(broker, ctx, t, auto_create) for t in request.topics]
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(
                node_id=b.node_id, host=b.host, port=b.port, rack=b.rack
            )
            for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
            if not b.fenced
        ],
        cluster_id=image.cluster_id,
        controller_id=broker.controller.active_controller_id,
        topics=topics,
        error_code=ErrorCode.NONE,  # v13: a top-level error (REBOOTSTRAP_REQUIRED), never set
    )


async def _lookup(
    broker: BrokerParts, ctx: RequestContext, requested: Any, auto_create: bool
) -> Any:
    image = broker.image
    name = requested.name
    if name is None and requested.topic_id not in (None, ZERO_UUID):
        topic = image.topics_by_id.get(str(requested.topic_id))
        if topic is None:
            return _error(ErrorCode.UNKNOWN_TOPIC_ID, None, requested.topic_id)
        return _describe(broker, topic)
    try:
        validate_topic_name(name or "")
    except ControllerError:
        return _error(ErrorCode.INVALID_TOPIC_EXCEPTION, name)
    topic = image.topics.get(name)
    if topic is None and auto_create and name not in INTERNAL_TOPICS:
        try:
            [(_, error)] = await broker.controller.create_topics([NewTopic(name)])
        except ControllerError as exc:  # no answer from the quorum
            error = exc
        if error is not None and error.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            return _error(error.error_code, name)
        # As CreateTopics: answer once this broker has opened its replicas of it.
        await broker.replicas.settled(
            within=broker.config.get_int("controller.quorum.request.timeout.ms") / 1000)
        topic = image.topics.get(name)
    if topic is None:
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
    return _describe(broker, topic)


def _error(code: ErrorCode, name: str | None, topic_id: Any = ZERO_UUID) -> Any:
    return Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


def _describe(broker: BrokerParts, topic: TopicImage) -> Any:
    brokers = broker.image.brokers
    partitions = []
    for index, p in sorted(topic.partitions.items()):
        offline = [r for r in p.replicas if r not in brokers or brokers[r].fenced]
        partitions.append(PartitionMeta(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader == -1 else ErrorCode.NONE,
            partition_index=index, leader_id=p.leader, leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas, isr_nodes=p.isr, offline_replicas=offline,
        ))
    return Topic(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=uuid.UUID(topic.topic_id),
        is_internal=topic.name in INTERNAL_TOPICS, partitions=partitions,
    )
