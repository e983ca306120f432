"""ElectLeaders (43): preferred or unclean leader elections, decided by the controller.

v0 has no election type (it is a preferred election) and no top-level error code. Results
come per partition, with Kafka's errors (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION). For "every partition" (null),
only the partitions that needed an election are listed, as Kafka does.
"""

from typing import Any

from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from brokercore.controller.controller import ControllerError
from brokercore.controller.elections import ElectionType
from brokercore.handlers.authorization import cluster_refused
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

Topic = ElectLeadersResponse.ReplicaElectionResult
Partition = Topic.PartitionResult
Results = dict[TopicPartition, ControllerError | None]


@serves(ElectLeadersRequest, ElectLeadersResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    tps = requested_partitions(request)
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.ALTER):
        refusal = cluster_refused()
        return response(dict.fromkeys(tps or [], refusal), refusal)
    raw_type = request.election_type if ctx.api_version >= 1 else ElectionType.PREFERRED
    try:
        try:
            election_type = ElectionType(int(raw_type))
        except ValueError:
            raise ControllerError(ErrorCode.INVALID_REQUEST,
                                  f"Unknown election type {int(raw_type)}.") from None
        results = await broker.controller.elect_leaders(election_type, tps)
    except ControllerError as exc:
        # The whole request failed (no active controller, a timeout, a bad type).
        return response(dict.fromkeys(tps or [], exc), exc)
    return response(results, None)


def requested_partitions(request: Any) -> list[TopicPartition] | None:
    if request.topic_partitions is None:
        return None
    seen = dict.fromkeys(TopicPartition(t.topic, p) for t in request.topic_partitions
                         for p in t.partitions)
    return list(seen)


def response(results: Results, error: ControllerError | None) -> Any:
    topics: dict[str, list[Any]] = {}
    for tp, result in results.items():
        topics.setdefault(tp.topic, []).append(Partition(
            partition_id=tp.partition,
            error_code=ErrorCode.NONE if result is None else result.error_code,
            error_message=None if result is None else result.message,
        ))
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE if error is None else error.error_code,
        replica_election_results=[Topic(topic=name, partition_result=parts)
                                  for name, parts in topics.items()],
    )
