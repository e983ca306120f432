"""Heartbeat (12): keep a member's session alive; learn of rebalances."""

from typing import Any

from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from brokercore.coordinator import coordinator_of
from brokercore.protocol.apis import serves
from brokercore.server import RequestContext


@serves(HeartbeatRequest, HeartbeatResponse, min_version=0, max_version=4)
async def handle(ctx: RequestContext, request: Any) -> Any:
    error = coordinator_of(ctx).membership.heartbeat(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
