"""ListGroups (16): the groups this broker coordinates, filtered by state from v4."""

from typing import Any

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode

Listed = ListGroupsResponse.ListedGroup


# v5 filters by group type (KIP-848 groups), which this broker does not have.
@serves(ListGroupsRequest, ListGroupsResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    states = set(request.states_filter) if ctx.api_version >= 4 and request.states_filter else None
    groups = broker.groups.list_groups(states)
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        Listed(group_id=g.group_id, protocol_type=g.protocol_type or "",
               group_state=g.state.value, group_type="classic")
        for g in sorted(groups, key=lambda g: g.group_id)
    ])
