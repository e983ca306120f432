"""ListTransactions (66): the transactional ids this broker coordinates, filtered by state,
producer id, how long the transaction has run (v1) and an id pattern (v2, a Java regex
matched in full; the common subset is Python's). While any of this broker's
`__transaction_state` partitions loads: COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers."""

import re
from typing import Any

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.txn import TxnError, TxnState

State = ListTransactionsResponse.TransactionState
KNOWN_STATES = {state.kafka_name for state in TxnState}


@serves(ListTransactionsRequest, ListTransactionsResponse, min_version=0, max_version=2)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    def answer(code: ErrorCode, states: list[Any], unknown: list[str]) -> Any:
        return ListTransactionsResponse(throttle_time_ms=0, error_code=code,
                                        unknown_state_filters=unknown, transaction_states=states)

    wanted = set(request.state_filters)
    producer_ids = set(request.producer_id_filters)
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    raw_pattern = request.transactional_id_pattern if ctx.api_version >= 2 else None
    try:
        pattern = re.compile(raw_pattern) if raw_pattern else None
    except re.error:
        return answer(ErrorCode.INVALID_REQUEST, [], [])
    try:
        listed = broker.transactions.list_transactions()
    except TxnError as exc:  # COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers while loading
        return answer(exc.error_code, [], [])
    now = broker.transactions.clock.time_ms()
    found = [
        State(transactional_id=m.transactional_id, producer_id=m.record.producer_id,
              transaction_state=m.record.state.kafka_name)
        for m in listed
        if (not wanted or m.record.state.kafka_name in wanted)
        and (not producer_ids or m.record.producer_id in producer_ids)
        and (duration < 0 or (m.record.start_ms >= 0 and now - m.record.start_ms > duration))
        and (pattern is None or pattern.fullmatch(m.transactional_id))
        # Kafka lists the transactional ids the principal may describe
        and broker.authorizer.authorize_transactional_id(ctx, AclOperation.DESCRIBE,
                                                         m.transactional_id, audit=False)
    ]
    return answer(ErrorCode.NONE, found, sorted(wanted - KNOWN_STATES))
