"""DescribeAcls (29): the ACLs a filter selects, by resource; needs DESCRIBE on the cluster."""

from itertools import groupby
from typing import Any

from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclBinding, AclError, AclOperation, new_filter

Resource = DescribeAclsResponse.DescribeAclsResource
Description = Resource.AclDescription


@serves(DescribeAclsRequest, DescribeAclsResponse, min_version=1, max_version=3)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.enabled:
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.DESCRIBE):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    try:
        acl_filter = new_filter(
            request.resource_type_filter, request.resource_name_filter,
            request.pattern_type_filter, request.principal_filter, request.host_filter,
            request.operation, request.permission_type)
    except AclError as exc:
        return _error(ErrorCode.INVALID_REQUEST, str(exc))
    acls = sorted((acl for _, acl in broker.image.acls.matching(acl_filter)), key=_order)
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        resources=[
            Resource(resource_type=rtype, resource_name=name, pattern_type=pattern,
                     acls=[Description(principal=a.principal, host=a.host,
                                       operation=a.operation, permission_type=a.permission)
                           for a in group])
            for (rtype, name, pattern), group in groupby(acls, key=_resource)])


def _resource(acl: AclBinding) -> tuple[int, str, int]:
    return int(acl.resource_type), acl.resource_name, int(acl.pattern_type)


def _order(acl: AclBinding) -> tuple[Any, ...]:
    return (*_resource(acl), acl.principal, acl.host, int(acl.operation), int(acl.permission))


def _error(code: ErrorCode, message: str) -> Any:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                resources=[])
