"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, for KIP-101/KIP-320."""

from typing import Any

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


@serves(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, min_version=2, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    authorizer = broker.authorizer
    follower = request.replica_id >= 0  # a follower's request is a cluster action
    cluster_action = follower and authorizer.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)

    def may_describe(topic: str) -> bool:
        if follower:
            return cluster_action
        return authorizer.authorize_topic(ctx, AclOperation.DESCRIBE, topic)

    return OffsetForLeaderEpochResponse(
        throttle_time_ms=0,
        topics=[
            TopicResult(topic=t.topic, partitions=[
                _end(broker, t.topic, p, authorized) for p in t.partitions])
            for t in request.topics
            for authorized in (may_describe(t.topic),)
        ],
    )


def _end(broker: BrokerParts, topic: str, p: Any, authorized: bool) -> Any:
    if not authorized:
        return EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              partition=p.partition, leader_epoch=-1, end_offset=-1)
    try:
        partition = broker.replicas.leader_partition(TopicPartition(topic, p.partition))
        partition.check_leader_epoch(p.current_leader_epoch)
    except PartitionError as exc:
        return EpochEndOffset(error_code=exc.error_code, partition=p.partition, leader_epoch=-1,
                              end_offset=-1)
    epoch, end_offset = partition.epoch_end(p.leader_epoch)
    return EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch,
                          end_offset=end_offset)
