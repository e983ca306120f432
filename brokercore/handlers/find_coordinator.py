"""FindCoordinator (10): which broker coordinates a group (key type 0) or a transactional
id (key type 1); batched keys from v4. v5 (the client understands TRANSACTION_ABORTABLE) and
v6 (key type 2, share groups) are v4 on the wire; share groups are not served, so key type 2
gets INVALID_REQUEST.

The coordinator is the leader of the key's partition of `__consumer_offsets` or
`__transaction_state`, which the first lookup creates.
"""

from typing import Any

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from brokercore.coordinator import GroupCoordinator
from brokercore.coordinator.state import GroupError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.txn import TransactionCoordinator

Coordinator = FindCoordinatorResponse.Coordinator
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


@serves(FindCoordinatorRequest, FindCoordinatorResponse, min_version=0, max_version=6)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    key_type = request.key_type if ctx.api_version >= 1 else GROUP_KEY_TYPE
    if ctx.api_version >= 4:
        found = [await _find(broker, ctx, key, key_type) for key in request.coordinator_keys]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=found)
    one = await _find(broker, ctx, request.key, key_type)
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=one.error_code, error_message=one.error_message,
        node_id=one.node_id, host=one.host, port=one.port,
    )


async def _find(broker: BrokerParts, ctx: RequestContext, key: str, key_type: int) -> Any:
    coordinator: GroupCoordinator | TransactionCoordinator
    authorizer = broker.authorizer
    if key_type == GROUP_KEY_TYPE:
        coordinator = broker.groups
        if not authorizer.authorize_group(ctx, AclOperation.DESCRIBE, key):
            return _error(key, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                          "Group authorization failed.")
    elif key_type == TRANSACTION_KEY_TYPE:
        coordinator = broker.transactions
        if not authorizer.authorize_transactional_id(ctx, AclOperation.DESCRIBE, key):
            return _error(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                          "Transactional Id authorization failed.")
    else:
        return _error(key, ErrorCode.INVALID_REQUEST,
                      f"unsupported coordinator key type {key_type}")
    try:
        await coordinator.store.ensure_exists()
    except GroupError as exc:
        return _error(key, exc.error_code, str(exc))
    leader = coordinator.store.leader(coordinator.partition_of(key))
    node = broker.image.brokers.get(leader)
    endpoint = node.endpoint(ctx.listener) if node is not None and not node.fenced else None
    if node is None or endpoint is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator is not available")
    return Coordinator(key=key, node_id=node.node_id, host=endpoint[0], port=endpoint[1],
                       error_code=ErrorCode.NONE, error_message=None)


def _error(key: str, code: ErrorCode, message: str) -> Any:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                       error_message=message)
