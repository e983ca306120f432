"""OffsetDelete (47): drop a group's offsets for partitions it no longer subscribes to."""

from typing import Any

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from brokercore.coordinator.state import GroupError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = Topic.OffsetDeleteResponsePartition


@serves(OffsetDeleteRequest, OffsetDeleteResponse, min_version=0, max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    authorizer = broker.authorizer
    if not authorizer.authorize_group(ctx, AclOperation.DELETE, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                    throttle_time_ms=0, topics=[])
    readable = {t.name for t in request.topics
                if authorizer.authorize_topic(ctx, AclOperation.READ, t.name)}
    wanted = [TopicPartition(t.name, p.partition_index)
              for t in request.topics if t.name in readable for p in t.partitions]
    try:
        errors = await broker.groups.offsets.delete_offsets(request.group_id, wanted)
    except GroupError as exc:
        return OffsetDeleteResponse(error_code=exc.error_code, throttle_time_ms=0, topics=[])
    errors.update({TopicPartition(t.name, p.partition_index):
                   ErrorCode.TOPIC_AUTHORIZATION_FAILED
                   for t in request.topics if t.name not in readable for p in t.partitions})
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[
            Partition(partition_index=p.partition_index,
                      error_code=errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions
        ])
        for t in request.topics
    ])
