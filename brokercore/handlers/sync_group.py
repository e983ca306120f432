"""SyncGroup (14): the leader hands in assignments; every member gets its own."""

from typing import Any

from kafka.protocol.consumer import SyncGroupRequest, SyncGroupResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation


@serves(SyncGroupRequest, SyncGroupResponse, min_version=0, max_version=5)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if not broker.authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return SyncGroupResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            protocol_type=None, protocol_name=None, assignment=b"")
    protocol = ((request.protocol_type, request.protocol_name) if version >= 5
                else (None, None))
    result = await broker.groups.membership.sync(
        request.group_id, request.generation_id, request.member_id,
        request.group_instance_id if version >= 3 else None, protocol,
        {a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return SyncGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, protocol_type=result.protocol_type,
        protocol_name=result.protocol_name, assignment=result.assignment,
    )
