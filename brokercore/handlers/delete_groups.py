"""DeleteGroups (42): remove empty groups and their offsets (tombstones)."""

from typing import Any

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Result = DeleteGroupsResponse.DeletableGroupResult


@serves(DeleteGroupsRequest, DeleteGroupsResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    offsets, authorizer = broker.groups.offsets, broker.authorizer
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=group_id, error_code=await offsets.delete_group(group_id)
               if authorizer.authorize_group(ctx, AclOperation.DELETE, group_id)
               else ErrorCode.GROUP_AUTHORIZATION_FAILED)
        for group_id in request.groups_names
    ])
