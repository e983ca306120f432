"""Heartbeat (12): keep a member's session alive; learn of rebalances."""

from typing import Any

from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation


@serves(HeartbeatRequest, HeartbeatResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0,
                                 error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = broker.groups.membership.heartbeat(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
