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
from brokercore.handlers.authorization import (
    NOT_REQUESTED,
    cluster_operations,
    may_create_topic,
)
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation, ResourceType

Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = Topic.MetadataResponsePartition
ZERO_UUID = uuid.UUID(int=0)


@serves(MetadataRequest, MetadataResponse, min_version=0, max_version=13)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    authorizer = broker.authorizer
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        # every topic the principal may describe; the others are left out, silently
        wanted: list[str | Any] = [
            name for name in sorted(broker.image.topics)
            if authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, name, audit=False)]
    else:
        auto_create = broker.config.get_bool("auto.create.topics.enable") and (
            ctx.api_version < 4 or request.allow_auto_topic_creation
        )
        wanted = [await _lookup(broker, ctx, t, auto_create) for t in request.topics]
    # From here on nothing awaits: the topics, their leaders and the brokers come from one
    # state of the image, so every leader named is a broker listed (as in Kafka, where a
    # leader is always a live broker), even when creating a topic above took a while.
    image = broker.image
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(
                node_id=b.node_id, host=endpoint[0], port=endpoint[1], rack=b.rack
            )
            for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
            if not b.fenced and (endpoint := b.endpoint(ctx.listener)) is not None
        ],
        cluster_id=image.cluster_id,
        controller_id=broker.controller.active_controller_id,
        topics=[_describe(broker, ctx, name, request) if isinstance(name, str) else name
                for name in wanted],
        error_code=ErrorCode.NONE,  # v13: a top-level error (REBOOTSTRAP_REQUIRED), never set
        authorized_operations=cluster_operations(
            broker, ctx,
            8 <= ctx.api_version <= 10 and request.include_cluster_authorized_operations),
    )


async def _lookup(broker: BrokerParts, ctx: RequestContext, requested: Any,
                  auto_create: bool) -> str | Any:
    """The name of the requested topic, created first if need be; or the answer for it
    when it cannot be described (an unknown id, an illegal name, a failed creation, no
    DESCRIBE on it, or no CREATE on it or the cluster for an auto-creation)."""
    image = broker.image
    name = requested.name
    if name is None and requested.topic_id not in (None, ZERO_UUID):
        topic = image.topics_by_id.get(str(requested.topic_id))
        if topic is None or not broker.authorizer.authorize_topic(
                ctx, AclOperation.DESCRIBE, topic.name):
            return _error(ErrorCode.UNKNOWN_TOPIC_ID if topic is None
                          else ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, requested.topic_id)
        return topic.name
    try:
        validate_topic_name(name or "")
    except ControllerError:
        return _error(ErrorCode.INVALID_TOPIC_EXCEPTION, name)
    if not broker.authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, name):
        return _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
    if name not in image.topics and auto_create and name not in INTERNAL_TOPICS:
        if not may_create_topic(broker, ctx, name):
            return _error(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name)
        try:
            [(_, error)] = await broker.controller.create_topics([NewTopic(name)])
        except ControllerError as exc:  # no answer from the quorum
            error = exc
        if error is not None and error.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            return _error(error.error_code, name)
        # As CreateTopics: answer once this broker has opened its replicas of it.
        await broker.replicas.settled(
            within=broker.config.get_int("controller.quorum.request.timeout.ms") / 1000)
    return str(name)


def _error(code: ErrorCode, name: str | None, topic_id: Any = ZERO_UUID) -> Any:
    return Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


def _describe(broker: BrokerParts, ctx: RequestContext, name: str, request: Any) -> Any:
    topic = broker.image.topics.get(name)
    if topic is None:  # never created, or deleted while another topic was being created
        return _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
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
        authorized_operations=(
            broker.authorizer.authorized_operations(ctx, ResourceType.TOPIC, name)
            if ctx.api_version >= 8 and request.include_topic_authorized_operations
            else NOT_REQUESTED),
    )
