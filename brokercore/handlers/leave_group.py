"""LeaveGroup (13): members leave at once instead of timing out; batched from v3; each
member's reason (v5, KIP-800) is logged."""

import logging
from typing import Any

from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

log = logging.getLogger(__name__)

MemberResponse = LeaveGroupResponse.MemberResponse


@serves(LeaveGroupRequest, LeaveGroupResponse, min_version=0, max_version=5)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return LeaveGroupResponse(throttle_time_ms=0,
                                  error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[])
    if ctx.api_version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
        for m in request.members:
            if ctx.api_version >= 5 and m.reason:
                log.info("node %d: group %s: member %r of %s leaves: %s", broker.node_id,
                         request.group_id, m.member_id, ctx.client_id, m.reason)
    else:
        leaving = [(request.member_id, None)]
    error, member_errors = broker.groups.membership.leave(request.group_id, leaving)
    if ctx.api_version < 3:
        error = member_errors[0] if error == 0 else error
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=error,
        members=[MemberResponse(member_id=m, group_instance_id=i, error_code=e)
                 for (m, i), e in zip(leaving, member_errors, strict=True)],
    )
