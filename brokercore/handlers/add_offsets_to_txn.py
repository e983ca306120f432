"""AddOffsetsToTxn (25): a transaction will commit a group's offsets (TxnOffsetCommit), so
the group's `__consumer_offsets` partition joins the transaction and gets its marker."""

from typing import Any

from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from brokercore.coordinator import OFFSETS_TOPIC
from brokercore.coordinator.state import GroupError
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition
from brokercore.txn import TxnError, fenced_for_version


@serves(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    def answer(code: ErrorCode) -> Any:
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_for_version(
            code, ctx.api_version, since=2))

    authorizer = broker.authorizer
    if not authorizer.authorize_transactional_id(ctx, AclOperation.WRITE,
                                                 request.transactional_id):
        return answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return answer(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not request.group_id:
        return answer(ErrorCode.INVALID_GROUP_ID)
    try:
        await broker.groups.store.ensure_exists()
    except GroupError as exc:
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE if exc.error_code
                      == ErrorCode.NOT_COORDINATOR else exc.error_code)
    tp = TopicPartition(OFFSETS_TOPIC, broker.groups.partition_of(request.group_id))
    try:
        [code] = (await broker.transactions.requests.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, {tp},
            {tp})).values()
    except TxnError as exc:
        return answer(exc.error_code)
    return answer(code)
