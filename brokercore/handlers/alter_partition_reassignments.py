"""AlterPartitionReassignments (45): start or cancel moving a partition's replicas.

A list of replicas starts (or replaces) a reassignment, null cancels one; the controller
decides (`controller/reassignment.py`). v1 adds `allow_replication_factor_change`
(KIP-860): when false, a target whose size differs from the current replication factor
gets INVALID_REPLICATION_FACTOR.
"""

from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)

from brokercore.controller.controller import ControllerError
from brokercore.controller.image import MetadataImage
from brokercore.handlers.authorization import cluster_refused
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
Partition = Topic.ReassignablePartitionResponse
Results = dict[TopicPartition, ControllerError | None]


@serves(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
        min_version=0, max_version=1)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    allow_rf_change = ctx.api_version < 1 or bool(request.allow_replication_factor_change)
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.ALTER):
        return response({}, cluster_refused(), allow_rf_change)
    changes, refused = requested_changes(broker.image, request, allow_rf_change)
    error = None
    results: Results = dict(refused)
    if changes:
        try:
            results.update(await broker.controller.alter_partition_reassignments(changes))
        except ControllerError as exc:
            error = exc
            results.update(dict.fromkeys(changes, exc))
    return response(results, error, allow_rf_change)


def requested_changes(
    image: MetadataImage, request: Any, allow_rf_change: bool
) -> tuple[dict[TopicPartition, list[int] | None], Results]:
    """The changes to pass to the controller, and those refused here already."""
    changes: dict[TopicPartition, list[int] | None] = {}
    refused: Results = {}
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            target = None if p.replicas is None else list(p.replicas)
            if tp in changes or tp in refused:
                refused[tp] = ControllerError(ErrorCode.INVALID_REQUEST,
                                              f"Duplicate partition {tp} in the request.")
                changes.pop(tp, None)
            elif target is not None and not allow_rf_change and _rf_changes(image, tp, target):
                refused[tp] = ControllerError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor of {tp} would change, which the request forbids.")
            else:
                changes[tp] = target
    return changes, refused


def _rf_changes(image: MetadataImage, tp: TopicPartition, target: list[int]) -> bool:
    topic = image.topics.get(tp.topic)
    part = topic.partitions.get(tp.partition) if topic is not None else None
    if part is None:
        return False  # the controller reports the unknown partition
    return len(target) != len(part.replicas) - len(part.adding_replicas)


def response(results: Results, error: ControllerError | None, allow_rf_change: bool) -> Any:
    topics: dict[str, list[Any]] = {}
    for tp, result in results.items():
        topics.setdefault(tp.topic, []).append(Partition(
            partition_index=tp.partition,
            error_code=ErrorCode.NONE if result is None else result.error_code,
            error_message=None if result is None else result.message,
        ))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=ErrorCode.NONE if error is None else error.error_code,
        error_message=None if error is None else error.message,
        responses=[Topic(name=name, partitions=parts) for name, parts in topics.items()],
    )
