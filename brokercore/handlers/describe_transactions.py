"""DescribeTransactions (65): the state of transactional ids this broker coordinates
(others get NOT_COORDINATOR, unknown ones TRANSACTIONAL_ID_NOT_FOUND)."""

from typing import Any

from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.txn import TxnError

State = DescribeTransactionsResponse.TransactionState
TopicData = State.TopicData


@serves(DescribeTransactionsRequest, DescribeTransactionsResponse, min_version=0,
        max_version=0)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    return DescribeTransactionsResponse(
        throttle_time_ms=0,
        transaction_states=[_describe(broker, ctx, t) for t in request.transactional_ids])


def _describe(broker: BrokerParts, ctx: RequestContext, transactional_id: str) -> Any:
    def error(code: ErrorCode) -> Any:
        return State(error_code=code, transactional_id=transactional_id, transaction_state="",
                     transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                     producer_epoch=-1, topics=[])

    if not broker.authorizer.authorize_transactional_id(ctx, AclOperation.DESCRIBE,
                                                        transactional_id):
        return error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    try:
        meta = broker.transactions.metadata(transactional_id)
    except TxnError as exc:
        return error(exc.error_code)
    if meta is None or meta.record.producer_id < 0:
        return error(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    record = meta.record
    by_topic: dict[str, list[int]] = {}
    for tp in record.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return State(
        error_code=ErrorCode.NONE, transactional_id=transactional_id,
        transaction_state=record.state.kafka_name, transaction_timeout_ms=record.timeout_ms,
        transaction_start_time_ms=record.start_ms, producer_id=record.producer_id,
        producer_epoch=record.producer_epoch,
        topics=[TopicData(topic=topic, partitions=sorted(ps)) for topic, ps in by_topic.items()])
