"""InitProducerId (22): producer ids and epochs for idempotent and transactional producers.

Without a transactional id, any broker hands out a new producer id (or, KIP-360, bumps the
epoch of the one the producer names). With one, the transactional id's coordinator answers
(`brokercore.txn`): it bumps the epoch, fencing older instances, after aborting their open
transaction. v5 is v4 on the wire: it tells the broker the client handles
TRANSACTION_ABORTABLE (KIP-890), which this broker sends only in Produce answers from v11.
"""

from typing import Any

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation, ResourceType
from brokercore.txn import TxnError, fenced_for_version

MAX_EPOCH = 32767


@serves(InitProducerIdRequest, InitProducerIdResponse, min_version=0, max_version=5)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    def answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code,
                                      producer_id=producer_id, producer_epoch=epoch)

    authorizer = broker.authorizer
    if request.transactional_id is not None:
        if not authorizer.authorize_transactional_id(ctx, AclOperation.WRITE,
                                                     request.transactional_id):
            return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on
    # some topic
    elif not (authorizer.authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE, audit=False)
              or authorizer.authorize_any(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    producer_id = request.producer_id if ctx.api_version >= 3 else -1
    producer_epoch = request.producer_epoch if ctx.api_version >= 3 else -1
    if request.transactional_id is not None:
        try:
            producer_id, epoch = await broker.transactions.requests.init_producer_id(
                request.transactional_id, request.transaction_timeout_ms, producer_id,
                producer_epoch)
        except TxnError as exc:
            return answer(fenced_for_version(exc.error_code, ctx.api_version, since=4))
        return answer(ErrorCode.NONE, producer_id, epoch)
    # KIP-360: an idempotent producer may ask to bump its own epoch after an error.
    if producer_id >= 0 and 0 <= producer_epoch < MAX_EPOCH - 1:
        return answer(ErrorCode.NONE, producer_id, producer_epoch + 1)
    return answer(ErrorCode.NONE, await broker.controller.allocate_producer_id(), 0)
