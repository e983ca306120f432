"""ConsumerGroupDescribe (69): epochs, assignor and members of KIP-848 consumer groups."""

import uuid
from typing import Any

from brokercore.coordinator.consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
)
from brokercore.coordinator.state import GroupError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.protocol.kip848_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from brokercore.security.acls import AclOperation, ResourceType
from brokercore.security.authorizer import bitfield

Described = ConsumerGroupDescribeResponse.DescribedGroup
NOT_REQUESTED = -(2**31)
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1  # v1 (KIP-1099)


# v1 adds each member's type: classic members of a migrated group are 0.
@serves(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
        min_version=0, max_version=1)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    authorizer = broker.authorizer
    groups = []
    for group_id in request.group_ids:
        if not authorizer.authorize_group(ctx, AclOperation.DESCRIBE, group_id):
            groups.append(Described(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                group_id=group_id, group_state=ConsumerGroupState.DEAD.value, group_epoch=-1,
                assignment_epoch=-1, assignor_name="", members=[],
                authorized_operations=NOT_REQUESTED))
            continue
        operations = NOT_REQUESTED
        if request.include_authorized_operations:  # KIP-430's bitfield
            operations = bitfield(authorizer.authorized_operations(
                ctx, ResourceType.GROUP, group_id))
        groups.append(_describe(broker, group_id, operations))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _describe(broker: BrokerParts, group_id: str, operations: int) -> Any:
    try:
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
        group = broker.groups.describe_group(group_id)
        if not isinstance(group, ConsumerGroup):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
                             if group is None else f"Group {group_id} is not a consumer group.")
    except GroupError as exc:
        return Described(error_code=exc.error_code, error_message=str(exc), group_id=group_id,
                         group_state=ConsumerGroupState.DEAD.value, group_epoch=-1,
                         assignment_epoch=-1, assignor_name="", members=[],
                         authorized_operations=operations)
    names = {topic_id: name for name, (topic_id, _) in broker.groups.topics().items()}
    return Described(
        error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
        group_state=group.state.value, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=broker.groups.consumer.assignor_of(group),
        members=[_member(group, m, names) for m in group.members.values()],
        authorized_operations=operations,
    )


def _member(group: ConsumerGroup, member: ConsumerMember, names: dict[str, str]) -> Any:
    M = Described.Member
    return M(member_id=member.member_id, instance_id=member.instance_id,
             rack_id=member.rack_id, member_epoch=member.member_epoch,
             client_id=member.client_id, client_host=member.client_host,
             subscribed_topic_names=list(member.subscribed_topic_names),
             subscribed_topic_regex=member.subscribed_topic_regex,
             assignment=_assignment(member.assigned, names),
             target_assignment=_assignment(group.target.get(member.member_id, {}), names),
             member_type=CONSUMER_MEMBER_TYPE if member.classic is None
             else CLASSIC_MEMBER_TYPE)


def _assignment(assignment: Assignment, names: dict[str, str]) -> Any:
    A = Described.Member.Assignment
    return A(topic_partitions=[
        A.TopicPartitions(topic_id=uuid.UUID(topic_id), topic_name=names.get(topic_id, ""),
                          partitions=sorted(parts))
        for topic_id, parts in sorted(assignment.items())
    ])
