"""OffsetCommit (8): store consumed positions in `__consumer_offsets` (v8 flexible)."""

from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from brokercore.coordinator.offsets import Commit
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = TopicResponse.OffsetCommitResponsePartition


# v9 is v8 for classic groups; for KIP-848 consumer groups its generation field is the member
# epoch, checked against the member's (STALE_MEMBER_EPOCH), and their members must use v9+.
# v10 (topic ids) is left out.
@serves(OffsetCommitRequest, OffsetCommitResponse, min_version=0, max_version=9)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    authorizer = broker.authorizer
    if not authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return _answer(request, lambda tp: ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = {topic.name for topic in request.topics
                if authorizer.authorize_topic(ctx, AclOperation.READ, topic.name)}
    commits: dict[TopicPartition, Commit] = {
        TopicPartition(topic.name, p.partition_index): (
            p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
            p.committed_metadata,
        )
        for topic in request.topics if topic.name in readable
        for p in topic.partitions
    }
    # v0 commits carry no generation: they are the "simple" kind.
    generation = request.generation_id_or_member_epoch if version >= 1 else -1
    member_id = request.member_id if version >= 1 else ""
    errors = await broker.groups.offsets.commit(
        request.group_id, generation, member_id,
        request.group_instance_id if version >= 7 else None, commits, version,
    )
    return _answer(request, lambda tp: errors[tp] if tp.topic in readable
                   else ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _answer(request: Any, error_of: Callable[[TopicPartition], ErrorCode]) -> Any:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=topic.name, partitions=[
            PartitionResponse(partition_index=p.partition_index,
                              error_code=error_of(TopicPartition(topic.name, p.partition_index)))
            for p in topic.partitions
        ])
        for topic in request.topics
    ])
