"""ListPartitionReassignments (46): the reassignments in progress.

Partitions that are unknown or not being reassigned are left out: the response has no
per-partition error, as in Kafka.
"""

from typing import Any

from kafka.protocol.admin import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

from brokercore.controller.controller import ControllerError
from brokercore.handlers.authorization import cluster_refused
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
Partition = Topic.OngoingPartitionReassignment
Ongoing = dict[TopicPartition, tuple[list[int], list[int], list[int]]]


@serves(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
        min_version=0, max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.DESCRIBE):
        return response({}, cluster_refused())
    tps = None
    if request.topics is not None:
        tps = [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    try:
        ongoing = await broker.controller.list_partition_reassignments(tps)
    except ControllerError as exc:
        return response({}, exc)
    return response(ongoing, None)


def response(ongoing: Ongoing, error: ControllerError | None) -> Any:
    topics: dict[str, list[Any]] = {}
    for tp, (replicas, adding, removing) in sorted(
            ongoing.items(), key=lambda item: (item[0].topic, item[0].partition)):
        topics.setdefault(tp.topic, []).append(Partition(
            partition_index=tp.partition, replicas=replicas, adding_replicas=adding,
            removing_replicas=removing,
        ))
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE if error is None else error.error_code,
        error_message=None if error is None else error.message,
        topics=[Topic(name=name, partitions=parts) for name, parts in topics.items()],
    )
