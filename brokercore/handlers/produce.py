"""Produce (0): append record batches as leader; acks 0, 1 and all.

A partition answered NOT_LEADER_OR_FOLLOWER names its current leader (v10+, KIP-951) and
the response lists that leader's endpoint, so the producer can move on at once.
v12 is v11 for producers that are not transactional, and for transactional ones too while
`transaction.version` 2 (KIP-890 part 2, where v12 adds partitions to the transaction
implicitly) is not a finalized feature, as here.

Transaction verification (KIP-890 part 1, `produce_verification.py`): a producer's first
transactional batch of a transaction on a partition is appended only once the transaction
coordinator has confirmed that the transaction includes the partition; refused, it answers
INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11), INVALID_PRODUCER_EPOCH for a fenced
producer, or NOT_ENOUGH_REPLICAS, which producers retry, when the coordinator cannot tell
yet. Appends keep the connection's request order: a request appends before its first
await, unless it must wait for the coordinator; then it, and every Produce of the
connection after it until it has appended, append in turn (`AppendOrder`). So idempotent
sequences arrive in order however many requests a producer pipelines. Writes that need no
verification (not transactional, or to a transaction already open on the partition) take
no extra await.

The records arrive as views of the request's own frame (`protocol/record_views.py`), which
the log stamps in place: nothing copies a produced byte between the socket and the file.
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from brokercore.handlers import produce_verification
from brokercore.handlers.leader_hints import HINTED_ERRORS, current_leader, node_endpoints
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.produce_verification import Verification
from brokercore.handlers.registry import serves
from brokercore.log import LogError
from brokercore.log.verification import VerificationGuard
from brokercore.protocol.context import NO_RESPONSE, RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.protocol.record_views import decode_records_as_views
from brokercore.replication.partition import Partition, PartitionError
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

log = logging.getLogger(__name__)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse


@dataclass
class _Outcome:
    response: Any
    partition: Partition | None = None
    last_offset: int = -1


Appended = list[tuple[str, list[_Outcome]]]


# v0-2 carry message format v0/v1, which the log refuses (UNSUPPORTED_FOR_MESSAGE_FORMAT);
# min 0 is still advertised because librdkafka before 2.11.1 checks features against exact
# versions and would otherwise silently disable compression.
decode_records_as_views(ProduceRequest)


@serves(ProduceRequest, ProduceResponse, min_version=0, max_version=12)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    denied = _denied(broker, ctx, request)
    if ctx.appends.waiting:
        appended = await _append_in_turn(broker, ctx, request, denied)
    else:
        verification = produce_verification.start(broker, request)
        if verification.guards:
            appended = await _append_in_turn(broker, ctx, request, denied, verification)
        else:  # appends before the first await: request order kept for free
            appended = _append_all(broker, ctx, request, denied, verification)
    if request.acks == 0:
        return NO_RESPONSE
    if request.acks == -1:
        timeout = max(request.timeout_ms, 0) / 1000
        waits = [_replicated(broker, ctx, outcome, timeout) for _, outcomes in appended
                 for outcome in outcomes]
        await asyncio.gather(*waits)
    responses = [
        TopicResponse(name=name, partition_responses=[o.response for o in outcomes])
        for name, outcomes in appended
    ]
    leaders = [p.current_leader.leader_id for t in responses for p in t.partition_responses
               if p.current_leader is not None and p.current_leader.leader_id >= 0]
    return ProduceResponse(
        responses=responses, throttle_time_ms=0,
        node_endpoints=node_endpoints(broker.image, leaders, ProduceResponse.NodeEndpoint,
                                      ctx.listener),
    )


def _denied(broker: BrokerParts, ctx: RequestContext, request: Any) -> dict[str, ErrorCode]:
    """The topics this request may not write to, with the error for each (Kafka: WRITE on the
    transactional id for a transactional producer, then WRITE on each topic)."""
    authorizer = broker.authorizer
    if not authorizer.enabled:
        return {}
    txn_id = request.transactional_id if ctx.api_version >= 3 else None
    if txn_id is not None and not authorizer.authorize_transactional_id(
            ctx, AclOperation.WRITE, txn_id):
        return {t.name: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                for t in request.topic_data}
    return {t.name: ErrorCode.TOPIC_AUTHORIZATION_FAILED for t in request.topic_data
            if not authorizer.authorize_topic(ctx, AclOperation.WRITE, t.name)}


async def _append_in_turn(broker: BrokerParts, ctx: RequestContext, request: Any,
                          denied: dict[str, ErrorCode],
                          started: Verification | None = None) -> Appended:
    """Verify what needs it, then append, once the connection's earlier Produce requests
    have appended."""
    async with ctx.appends.turn():
        verification = started or produce_verification.start(broker, request)
        if verification.guards:
            verification = await produce_verification.finish(broker, verification,
                                                              ctx.api_version)
        return _append_all(broker, ctx, request, denied, verification)


def _append_all(broker: BrokerParts, ctx: RequestContext, request: Any,
                denied: dict[str, ErrorCode], verification: Verification) -> Appended:
    appended, refused = [], verification.refused
    for topic in request.topic_data:
        outcomes = []
        code = denied.get(topic.name) if denied else None
        if code is not None:
            appended.append((topic.name, [
                _Outcome(_failed(broker, TopicPartition(topic.name, p.index), code, code.name))
                for p in topic.partition_data]))
            continue
        for p in topic.partition_data:
            tp = TopicPartition(topic.name, p.index)
            refusal = refused.get(tp) if refused else None
            if refusal is not None:
                log.info("node %d: refused produce to %s from %s: %s", broker.node_id, tp,
                         ctx.client_id, refusal.message)
                outcomes.append(_Outcome(_failed(broker, tp, refusal.error_code,
                                                 refusal.message)))
            else:
                outcomes.append(_append(broker, ctx, request.acks, tp, p.records,
                                        verification.guard(tp)))
        appended.append((topic.name, outcomes))
    return appended


def _append(
    broker: BrokerParts, ctx: RequestContext, acks: int, tp: TopicPartition, records: Any,
    verification_guard: VerificationGuard | None,
) -> _Outcome:
    try:
        if acks not in (-1, 0, 1):
            raise PartitionError(ErrorCode.INVALID_REQUIRED_ACKS)
        partition = broker.replicas.leader_partition(tp)
        if acks == -1:
            partition.check_min_insync_replicas()
        if not records:
            raise PartitionError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
        result = partition.append_as_leader(records, verification_guard)
    except PartitionError as exc:
        return _Outcome(_failed(broker, tp, exc.error_code, str(exc)))
    except LogError as exc:
        log.info("node %d: rejected produce to %s from %s: %s",
                 broker.node_id, tp, ctx.client_id, exc)
        return _Outcome(_failed(broker, tp, exc.error_code, str(exc)))
    response = PartitionResponse(
        index=tp.partition, error_code=ErrorCode.NONE, base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
        record_errors=[], error_message=None,
    )
    return _Outcome(response, partition, result.last_offset)


async def _replicated(
    broker: BrokerParts, ctx: RequestContext, outcome: _Outcome, max_wait: float
) -> None:
    """acks=all: hold the answer until the ISR has the batch, or say why it may not have."""
    if outcome.partition is None:
        return
    code = await outcome.partition.wait_until_replicated(outcome.last_offset, max_wait)
    if code != ErrorCode.NONE:
        log.info("node %d: acks=all produce to %s from %s ends with %s", broker.node_id,
                 outcome.partition.tp, ctx.client_id, code.name)
        outcome.response = _failed(broker, outcome.partition.tp, code, code.name)


def _failed(broker: BrokerParts, tp: TopicPartition, code: ErrorCode, message: str) -> Any:
    leader = current_leader(broker.image, tp) if code in HINTED_ERRORS else None
    return PartitionResponse(
        index=tp.partition, error_code=code, base_offset=-1, log_append_time_ms=-1,
        log_start_offset=-1, record_errors=[], error_message=message,
        current_leader=None if leader is None else PartitionResponse.LeaderIdAndEpoch(
            leader_id=leader[0], leader_epoch=leader[1]),
    )
