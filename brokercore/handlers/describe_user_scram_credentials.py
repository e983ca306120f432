"""DescribeUserScramCredentials (50): each user's SCRAM mechanisms and iterations, from the
metadata image (salts and keys are never sent)."""

from collections import Counter
from typing import Any

from kafka.protocol.admin import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = Result.CredentialInfo


@serves(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
        min_version=0, max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.DESCRIBE):
        return _refused(request.users)
    credentials = broker.image.scram_credentials
    names = [user.name for user in request.users or []] or sorted(credentials)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(Result(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice "
                              "in a single request", credential_infos=[]))
        elif name not in credentials:
            results.append(Result(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message="Attempt to describe a user credential that does not exist",
                credential_infos=[]))
        else:
            results.append(Result(
                user=name, error_code=ErrorCode.NONE, error_message=None,
                credential_infos=[CredentialInfo(mechanism=m, iterations=c.iterations)
                                  for m, c in sorted(credentials[name].items())]))
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)


def _refused(users: list[Any] | None) -> Any:
    """Kafka's refusal puts CLUSTER_AUTHORIZATION_FAILED on top and on each user asked
    about. confluent-kafka 2.x aborts the process (a bad free) on the top-level error, so
    when users are named it goes on each of them only, which tells a client the same; a
    request for every user has nowhere else to put it."""
    message = "Cluster authorization failed."
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    results = [Result(user=user.name, error_code=code, error_message=message,
                      credential_infos=[]) for user in users or []]
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE if results else code,
        error_message=None if results else message, results=results)
