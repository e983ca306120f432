"""ListGroups (16): the groups this broker coordinates, of both protocols.

States filter from v4; v5 (KIP-848) filters by type, and every version answers each group's
type ("classic" or "consumer"), as Kafka 4.0 does. While any of this broker's
`__consumer_offsets` partitions loads, the answer is COORDINATOR_LOAD_IN_PROGRESS and no
groups (Kafka 4.0's group coordinator), never a list missing that partition's groups.
"""

from typing import Any

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from brokercore.coordinator.consumer_group import ConsumerGroup
from brokercore.coordinator.state import GroupError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Listed = ListGroupsResponse.ListedGroup


@serves(ListGroupsRequest, ListGroupsResponse, min_version=0, max_version=5)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    states = set(request.states_filter) if version >= 4 and request.states_filter else None
    types = set(request.types_filter) if version >= 5 and request.types_filter else None
    everything = broker.authorizer.authorize_cluster(ctx, AclOperation.DESCRIBE, audit=False)
    try:
        groups = broker.groups.list_groups(states, types)
    except GroupError as exc:
        return ListGroupsResponse(throttle_time_ms=0, error_code=exc.error_code, groups=[])
    return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=[
        Listed(group_id=g.group_id, protocol_type=g.protocol_type or "",
               group_state=g.state.value,
               group_type="consumer" if isinstance(g, ConsumerGroup) else "classic")
        for g in sorted(groups, key=lambda g: g.group_id)
        # Kafka: all groups with DESCRIBE on the cluster, else those the principal may describe
        if everything or broker.authorizer.authorize_group(ctx, AclOperation.DESCRIBE,
                                                           g.group_id, audit=False)
    ])
