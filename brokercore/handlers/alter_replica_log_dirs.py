"""AlterReplicaLogDirs (34): move replicas to other log dirs of this broker."""

from typing import Any

from kafka.protocol.admin import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = TopicResult.AlterReplicaLogDirPartitionResult


@serves(AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, min_version=1, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    results: dict[str, list[Any]] = {}
    allowed = broker.authorizer.authorize_cluster(ctx, AclOperation.ALTER)
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                error = broker.replicas.alter_log_dir(TopicPartition(topic.name, index),
                                                      log_dir.path) \
                    if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                results.setdefault(topic.name, []).append(
                    PartitionResult(partition_index=index, error_code=error))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        TopicResult(topic_name=name, partitions=partitions)
        for name, partitions in results.items()])
