"""AlterUserScramCredentials (51): add, replace or remove users' SCRAM credentials.

The client sends the salted password (PBKDF2 of the password); the broker derives StoredKey
and ServerKey from it here, and the controller writes them as UserScramCredentialRecords.
Kafka's checks (`ScramControlManager`), each a per-user result: a user named twice in one
request gets DUPLICATE_RESOURCE, an empty name or iterations outside 4096-16384
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, and deleting a
credential that does not exist RESOURCE_NOT_FOUND (decided by the controller).
"""

from base64 import b64encode
from collections import Counter
from typing import Any

from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)

from brokercore.controller.controller import ControllerError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted,
)

Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
Refusal = tuple[ErrorCode, str]


def _refusal(name: str, mechanism: int, counts: Counter[str],
             iterations: int | None = None) -> Refusal | None:
    if counts[name] > 1:
        return (ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request")
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def _upsertion(upsertion: Any) -> dict[str, Any]:
    """The UserScramCredentialRecord fields of one upsertion."""
    credential = credential_from_salted(
        MECHANISMS[upsertion.mechanism], bytes(upsertion.salted_password),
        bytes(upsertion.salt), upsertion.iterations)
    return {"name": upsertion.name, "mechanism": upsertion.mechanism,
            "salt": b64encode(credential.salt).decode(),
            "stored_key": b64encode(credential.stored_key).decode(),
            "server_key": b64encode(credential.server_key).decode(),
            "iterations": credential.iterations}


@serves(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
        min_version=0, max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_cluster(ctx, AclOperation.ALTER):  # as Kafka
        users = dict.fromkeys([d.name for d in request.deletions]
                              + [u.name for u in request.upsertions])
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            Result(user=name, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=None) for name in users])
    counts = Counter([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    refused: dict[str, Refusal] = {}
    deletions: list[tuple[str, int]] = []
    upsertions: list[dict[str, Any]] = []
    for deletion in request.deletions:
        refusal = _refusal(deletion.name, deletion.mechanism, counts)
        if refusal is not None:
            refused[deletion.name] = refusal
        else:
            deletions.append((deletion.name, deletion.mechanism))
    for upsertion in request.upsertions:
        refusal = _refusal(upsertion.name, upsertion.mechanism, counts, upsertion.iterations)
        if refusal is not None:
            refused[upsertion.name] = refusal
        else:
            upsertions.append(_upsertion(upsertion))
    results = [Result(user=name, error_code=code, error_message=message)
               for name, (code, message) in refused.items()]
    if deletions or upsertions:
        try:
            answers = await broker.controller.alter_scram_credentials(deletions, upsertions)
        except ControllerError as exc:
            names = [name for name, _ in deletions] + [u["name"] for u in upsertions]
            answers = [(name, exc.error_code, exc.message) for name in names]
        results += [Result(user=name, error_code=code, error_message=message)
                    for name, code, message in answers]
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)
