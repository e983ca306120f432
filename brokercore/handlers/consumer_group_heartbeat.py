"""ConsumerGroupHeartbeat (68): join, stay in, and leave a KIP-848 consumer group."""

import uuid
from typing import Any

from brokercore.coordinator.consumer_group import Assignment
from brokercore.coordinator.consumer_protocol import HeartbeatRequest
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.protocol.kip848_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from brokercore.security.acls import AclOperation

R = ConsumerGroupHeartbeatResponse


# v1 (Kafka 4.0) adds the regex subscription; its members make up their own member ids
# (KIP-1082), while v0 members join with an empty id and are given one.
@serves(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
        min_version=0, max_version=1)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return R(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 error_message="Group authorization failed.", member_id=request.member_id,
                 member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    regex = request.subscribed_topic_regex if ctx.api_version >= 1 else None
    names = request.subscribed_topic_names
    result = await broker.groups.consumer.heartbeat(HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=tuple(names) if names is not None else None,
        subscribed_topic_regex=regex, server_assignor=request.server_assignor,
        owned=_owned(request.topic_partitions),
        client_id=ctx.client_id or "", client_host="/" + ctx.peer.rsplit(":", 1)[0],
    ))
    assignment = None
    if result.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.Assignment.TopicPartitions(topic_id=uuid.UUID(topic_id), partitions=sorted(parts))
            for topic_id, parts in sorted(result.assignment.items())
        ])
    return R(throttle_time_ms=0, error_code=result.error_code,
             error_message=result.error_message, member_id=result.member_id,
             member_epoch=result.member_epoch,
             heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


def _owned(topic_partitions: Any) -> Assignment | None:
    if topic_partitions is None:
        return None
    owned: Assignment = {}
    for t in topic_partitions:
        if t.partitions:
            owned[str(t.topic_id)] = owned.get(str(t.topic_id), frozenset()) | set(t.partitions)
    return owned
