"""DeleteAcls (31): remove the ACLs each filter selects; needs ALTER on the cluster."""

from typing import Any

from kafka.protocol.admin import DeleteAclsRequest, DeleteAclsResponse

from brokercore.controller.controller import ControllerError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclBinding, AclError, AclFilter, AclOperation, new_filter

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


@serves(DeleteAclsRequest, DeleteAclsResponse, min_version=1, max_version=3)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    filters = request.filters
    if not broker.authorizer.enabled:
        return _answer([(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.", [])]
                       * len(filters))
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.ALTER):
        return _answer([(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         "Cluster authorization failed.", [])] * len(filters))
    results: list[tuple[ErrorCode, str | None, list[AclBinding]] | None] = []
    valid: list[AclFilter] = []
    for f in filters:
        try:
            valid.append(new_filter(f.resource_type_filter, f.resource_name_filter,
                                    f.pattern_type_filter, f.principal_filter, f.host_filter,
                                    f.operation, f.permission_type))
            results.append(None)
        except AclError as exc:
            results.append((ErrorCode.INVALID_REQUEST, str(exc), []))
    try:
        deleted = await broker.controller.delete_acls(valid) if valid else []
    except ControllerError as exc:
        deleted = [exc] * len(valid)
    answers = iter(deleted)
    return _answer([result if result is not None else _result(next(answers))
                    for result in results])


def _result(answer: list[AclBinding] | ControllerError
            ) -> tuple[ErrorCode, str | None, list[AclBinding]]:
    if isinstance(answer, ControllerError):
        return answer.error_code, answer.message, []
    return ErrorCode.NONE, None, answer


def _answer(results: list[tuple[ErrorCode, str | None, list[AclBinding]]]) -> Any:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=code, error_message=message, matching_acls=[
            Matching(error_code=ErrorCode.NONE, error_message=None,
                     resource_type=a.resource_type, resource_name=a.resource_name,
                     pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                     operation=a.operation, permission_type=a.permission)
            for a in acls])
        for code, message, acls in results])
