"""EndTxn (26): commit or abort a transaction, on its coordinator.

The answer comes once the decision (PrepareCommit or PrepareAbort) is in
`__transaction_state`; the markers follow in the background, and the producer's next
transaction gets CONCURRENT_TRANSACTIONS (retriable) until they are all written. v5's
epoch bump per transaction (KIP-890, transaction version 2) is not served.
"""

from typing import Any

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.txn import TxnError, fenced_for_version


@serves(EndTxnRequest, EndTxnResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    if not broker.authorizer.authorize_transactional_id(ctx, AclOperation.WRITE,
                                                        request.transactional_id):
        return EndTxnResponse(throttle_time_ms=0,
                              error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    try:
        await broker.transactions.requests.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch,
            request.committed)
    except TxnError as exc:
        return EndTxnResponse(throttle_time_ms=0, error_code=fenced_for_version(
            exc.error_code, ctx.api_version, since=2))
    return EndTxnResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)
