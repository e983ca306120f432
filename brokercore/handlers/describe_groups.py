"""DescribeGroups (15): state, protocol and members of groups this broker coordinates."""

from typing import Any

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from brokercore.coordinator.state import ClassicGroupState, Group, GroupError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation, ResourceType

Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = Described.DescribedGroupMember
# The codec takes the bitfield as a set of bit numbers; None encodes "not requested".
NOT_REQUESTED = None


@serves(DescribeGroupsRequest, DescribeGroupsResponse, min_version=0, max_version=6)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    with_ops = ctx.api_version >= 3 and request.include_authorized_operations
    authorizer = broker.authorizer
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[
        _describe(broker, group_id,
                  authorizer.authorized_operations(ctx, ResourceType.GROUP, group_id)
                  if with_ops else NOT_REQUESTED, ctx.api_version)
        if authorizer.authorize_group(ctx, AclOperation.DESCRIBE, group_id)
        else _described(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, "", NOT_REQUESTED)
        for group_id in request.groups
    ])


def _describe(broker: BrokerParts, group_id: str, operations: frozenset[int] | None,
              version: int) -> Any:
    try:
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID)
        group = broker.groups.describe_group(group_id)
    except GroupError as exc:
        return _described(group_id, exc.error_code, "", operations)
    if not isinstance(group, Group):
        # Unknown, or a KIP-848 consumer group: Kafka 4.0 describes neither here (they have
        # ConsumerGroupDescribe); before v6 it answers Dead, from v6 GROUP_ID_NOT_FOUND.
        if version >= 6:
            return _described(group_id, ErrorCode.GROUP_ID_NOT_FOUND, "", operations,
                              f"Group {group_id} not found." if group is None
                              else f"Group {group_id} is not a classic group.")
        return _described(group_id, ErrorCode.NONE, ClassicGroupState.DEAD.value, operations)
    return Described(
        error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
        group_state=group.state.value, protocol_type=group.protocol_type or "",
        protocol_data=((group.protocol_name or "") if group.state is ClassicGroupState.STABLE
                       else ""),
        members=_members(group), authorized_operations=operations,
    )


def _members(group: Group) -> list[Any]:
    # Metadata and assignments are only consistent, and so only shown, in Stable.
    stable = group.state is ClassicGroupState.STABLE and group.protocol_name is not None
    return [
        DescribedMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            client_id=m.client_id, client_host=m.client_host,
            member_metadata=m.metadata_for(group.protocol_name or "") if stable else b"",
            member_assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    ]


def _described(
    group_id: str, code: ErrorCode, state: str, operations: frozenset[int] | None,
    message: str | None = None,
) -> Any:
    return Described(error_code=code, error_message=message, group_id=group_id,
                     group_state=state,
                     protocol_type="", protocol_data="", members=[],
                     authorized_operations=operations)
