"""CreateAcls (30): add ACLs to the metadata log; needs ALTER on the cluster."""

from typing import Any

from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse

from brokercore.controller.controller import ControllerError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclBinding, AclError, AclOperation, new_acl

Result = CreateAclsResponse.AclCreationResult


@serves(CreateAclsRequest, CreateAclsResponse, min_version=1, max_version=3)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    creations = request.creations
    if not broker.authorizer.enabled:
        return _answer([(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")]
                       * len(creations))
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.ALTER):
        return _answer([(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         "Cluster authorization failed.")] * len(creations))
    results: list[tuple[ErrorCode, str | None] | None] = []
    valid: list[AclBinding] = []
    for c in creations:
        try:
            valid.append(new_acl(c.resource_type, c.resource_name, c.resource_pattern_type,
                                 c.principal, c.host, c.operation, c.permission_type))
            results.append(None)
        except AclError as exc:
            results.append((ErrorCode.INVALID_REQUEST, str(exc)))
    try:
        created = await broker.controller.create_acls(valid) if valid else []
    except ControllerError as exc:
        created = [exc] * len(valid)
    answers = iter(created)
    return _answer([
        result if result is not None
        else _error(next(answers)) for result in results])


def _error(error: ControllerError | None) -> tuple[ErrorCode, str | None]:
    return (ErrorCode.NONE, None) if error is None else (error.error_code, error.message)


def _answer(results: list[tuple[ErrorCode, str | None]]) -> Any:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=code, error_message=message) for code, message in results])
