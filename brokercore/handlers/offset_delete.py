"""OffsetDelete (47): drop a group's offsets for partitions it no longer subscribes to."""

from typing import Any

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from brokercore.coordinator.state import GroupError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = Topic.OffsetDeleteResponsePartition


@serves(OffsetDeleteRequest, OffsetDeleteResponse, min_version=0, max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    wanted = [TopicPartition(t.name, p.partition_index)
              for t in request.topics for p in t.partitions]
    try:
        errors = await broker.groups.offsets.delete_offsets(request.group_id, wanted)
    except GroupError as exc:
        return OffsetDeleteResponse(error_code=exc.error_code, throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[
            Partition(partition_index=p.partition_index,
                      error_code=errors[TopicPartition(t.name, p.partition_index)])
            for p in t.partitions
        ])
        for t in request.topics
    ])
