"""CreateTopics (19): create topics, or with validate_only just say whether we would.

The request's shape (counts against a manual assignment, non-positive counts) is checked
here in Kafka's order; the controller checks names, existence, configs and placement and
writes the records. v5+ answers with the partition count, replication factor and every
config of the new topic with its source.
"""

import uuid
from collections import Counter
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from brokercore.controller.controller import ControllerError, NewTopic, validate_topic_name
from brokercore.handlers.authorization import AUTHORIZATION_FAILED, may_create_topic
from brokercore.handlers.config_resources import topic_entries_for
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Result = CreateTopicsResponse.CreatableTopicResult
ResultConfig = Result.CreatableTopicConfigs
ZERO_UUID = uuid.UUID(int=0)


@serves(CreateTopicsRequest, CreateTopicsResponse, min_version=0, max_version=7)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    validate_only = ctx.api_version >= 1 and request.validate_only
    counts = Counter(t.name for t in request.topics)
    results: dict[str, Any] = dict.fromkeys(counts)  # answers in request order
    to_create = []
    for topic in request.topics:
        try:
            if counts[topic.name] > 1:
                raise ControllerError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            to_create.append(_new_topic(broker, ctx, topic))
        except ControllerError as exc:
            results[topic.name] = _failed(topic.name, exc)
    try:
        created = await broker.controller.create_topics(to_create, validate_only=validate_only)
    except ControllerError as exc:  # no answer from the quorum: none is known to exist
        created = [(new, exc) for new in to_create]
    for new, error in created:
        results[new.name] = _failed(new.name, error) if error else _created(broker, ctx, new)
    if not validate_only:
        # This broker opens its replicas in the background: a client producing here next
        # finds them. The answer is the same either way, as the topics exist once their
        # records are committed.
        await broker.replicas.settled(within=max(request.timeout_ms, 0) / 1000)
    return CreateTopicsResponse(throttle_time_ms=0, topics=list(results.values()))


def _new_topic(broker: BrokerParts, ctx: RequestContext, topic: Any) -> NewTopic:
    if not may_create_topic(broker, ctx, topic.name):
        raise ControllerError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_FAILED)
    validate_topic_name(topic.name)
    if topic.name in broker.image.topics:
        raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS,
                              f"Topic '{topic.name}' already exists.")
    colliding = _colliding(broker, topic.name)
    if colliding:
        raise ControllerError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{topic.name}' collides with existing topics: {', '.join(colliding)}",
        )
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise ControllerError(ErrorCode.INVALID_CONFIG,
                              f"Null value not supported for topic configs: {', '.join(nulls)}")
    assignments = _assignments(broker, topic)
    if not assignments:
        _check_counts(topic.num_partitions, topic.replication_factor)
    return NewTopic(topic.name, topic.num_partitions, topic.replication_factor, assignments,
                    {c.name: c.value for c in topic.configs})


def _colliding(broker: BrokerParts, name: str) -> list[str]:
    """Existing topics that differ only in '.' versus '_': their metric names would clash."""
    if "." not in name and "_" not in name:
        return []
    key = name.replace(".", "_")
    return sorted(t for t in broker.image.topics if t.replace(".", "_") == key)


def _assignments(broker: BrokerParts, topic: Any) -> dict[int, list[int]]:
    assignments: dict[int, list[int]] = {}
    for a in topic.assignments:
        if a.partition_index in assignments:
            raise ControllerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {a.partition_index}",
            )
        assignments[a.partition_index] = list(a.broker_ids)
    if assignments:
        if topic.replication_factor != -1:
            raise ControllerError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was "
                                  "specified, but replication factor was not set to -1.")
        if topic.num_partitions != -1:
            raise ControllerError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was "
                                  "specified, but numPartitions was not set to -1.")
        broker.controller.topics.validate_manual_assignment(assignments)
    return assignments


def _check_counts(num_partitions: int, replication_factor: int) -> None:
    """-1 means the broker default; zero and other negatives are refused."""
    if replication_factor < -1 or replication_factor == 0:
        raise ControllerError(ErrorCode.INVALID_REPLICATION_FACTOR,
                              "Replication factor was set to an invalid non-positive value.")
    if num_partitions < -1 or num_partitions == 0:
        raise ControllerError(ErrorCode.INVALID_PARTITIONS,
                              "Number of partitions was set to an invalid non-positive value.")


def _failed(name: str, error: ControllerError) -> Any:
    return Result(name=name, topic_id=ZERO_UUID, error_code=error.error_code,
                  error_message=error.message, topic_config_error_code=ErrorCode.NONE,
                  num_partitions=-1, replication_factor=-1, configs=None)


def _created(broker: BrokerParts, ctx: RequestContext, topic: NewTopic) -> Any:
    image_topic = broker.image.topics.get(topic.name)
    if not broker.authorizer.authorize_topic(ctx, AclOperation.DESCRIBE_CONFIGS, topic.name,
                                             audit=False):
        # Kafka: created, but its configs are not shown to who may not describe them
        return Result(
            name=topic.name,
            topic_id=uuid.UUID(image_topic.topic_id) if image_topic else ZERO_UUID,
            error_code=ErrorCode.NONE, error_message=None,
            topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            num_partitions=topic.num_partitions, replication_factor=topic.replication_factor,
            configs=None)
    return Result(
        name=topic.name,
        topic_id=uuid.UUID(image_topic.topic_id) if image_topic else ZERO_UUID,
        error_code=ErrorCode.NONE, error_message=None, topic_config_error_code=ErrorCode.NONE,
        num_partitions=topic.num_partitions, replication_factor=topic.replication_factor,
        configs=[
            ResultConfig(name=e.name, value=e.value, read_only=e.read_only,
                         config_source=e.source, is_sensitive=e.sensitive)
            for e in topic_entries_for(broker, topic.configs)
        ],
    )
