"""JoinGroup (11): join a classic group and wait for the rebalance; MEMBER_ID_REQUIRED v4+.

v8 adds the client's reason for joining (KIP-800), which is logged; v9 adds
`skip_assignment` (KIP-814), set for a static leader that rejoins a stable group: it gets
the members, to watch their subscriptions, and must not assign anew.
"""

import logging
from typing import Any

from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

from brokercore.coordinator.membership import JoinRequest
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

log = logging.getLogger(__name__)

Member = JoinGroupResponse.JoinGroupResponseMember


@serves(JoinGroupRequest, JoinGroupResponse, min_version=0, max_version=9)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if not broker.authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            generation_id=-1, protocol_type=None, protocol_name=None if version >= 7 else "",
            leader="", skip_assignment=False, member_id="", members=[])
    # v0 has no rebalance timeout: the session timeout served as both.
    if version >= 8 and request.reason:
        log.info("node %d: group %s: member %r of %s joins: %s", broker.node_id,
                 request.group_id, request.member_id, ctx.client_id, request.reason)
    rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else -1
    if rebalance_timeout < 0:
        rebalance_timeout = request.session_timeout_ms
    result = await broker.groups.membership.join(JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.client_id or "",
        client_host="/" + ctx.peer.rsplit(":", 1)[0],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member=version >= 4,
    ))
    # Before v7 the protocol name is not nullable: the empty string stands for none.
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error_code, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name,
        leader=result.leader_id, skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[Member(member_id=m, group_instance_id=i, metadata=md)
                 for m, i, md in result.members],
    )
