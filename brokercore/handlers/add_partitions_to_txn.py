"""AddPartitionsToTxn (24): add the partitions a transactional producer writes to its
transaction, on the transactional id's coordinator.

v0-3 carry one transaction; v4+ (which brokers send) a batch of them, each possibly
`verify_only` (KIP-890's check that a partition is in the transaction). Kafka's rule: if
any partition of a transaction does not exist, none is added (OPERATION_NOT_ATTEMPTED for
the others).
"""

from typing import Any

from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition
from brokercore.txn import TxnError, fenced_for_version

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult


@serves(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, min_version=0, max_version=5)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    authorizer = broker.authorizer
    if ctx.api_version < 4:
        refused = _refused(broker, ctx, request.v3_and_below_transactional_id,
                           request.v3_and_below_topics)
        if refused is not None:
            return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                              results_by_topic_v3_and_below=refused)
        results = await _add(broker, request.v3_and_below_transactional_id,
                             request.v3_and_below_producer_id,
                             request.v3_and_below_producer_epoch, request.v3_and_below_topics,
                             api_version=ctx.api_version)
        return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                          results_by_topic_v3_and_below=results)
    # v4+ batches come from brokers verifying transactions (KIP-890): a cluster action
    if not authorizer.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[])
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE,
        results_by_transaction=[
            TxnResult(transactional_id=t.transactional_id, topic_results=await _add(
                broker, t.transactional_id, t.producer_id, t.producer_epoch, t.topics,
                verify_only=t.verify_only))
            for t in request.transactions
        ])


async def _add(broker: BrokerParts, transactional_id: str, producer_id: int,
               producer_epoch: int, topics: Any, verify_only: bool = False,
               api_version: int = 4) -> list[Any]:
    partitions = {TopicPartition(t.name, p) for t in topics for p in t.partitions}
    requests = broker.transactions.requests
    try:
        if verify_only:
            errors = requests.verify_partitions(transactional_id, producer_id, producer_epoch,
                                                partitions)
        else:
            errors = await requests.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions,
                {tp for tp in partitions if _exists(broker, tp)})
    except TxnError as exc:
        errors = dict.fromkeys(partitions,
                               fenced_for_version(exc.error_code, api_version, since=2))
    return results_by_topic(errors)


def _refused(broker: BrokerParts, ctx: RequestContext, transactional_id: str,
             topics: Any) -> list[Any] | None:
    """A client's request (v0-3) without WRITE on its transactional id or on some topic:
    Kafka answers every partition, the unauthorized ones with the authorization error and
    the others OPERATION_NOT_ATTEMPTED."""
    authorizer = broker.authorizer
    partitions = {TopicPartition(t.name, p) for t in topics for p in t.partitions}
    if not authorizer.authorize_transactional_id(ctx, AclOperation.WRITE, transactional_id):
        return results_by_topic(dict.fromkeys(
            partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    denied = {t.name for t in topics
              if not authorizer.authorize_topic(ctx, AclOperation.WRITE, t.name)}
    if not denied:
        return None
    return results_by_topic({
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp.topic in denied
        else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in partitions})


def _exists(broker: BrokerParts, tp: TopicPartition) -> bool:
    topic = broker.image.topics.get(tp.topic)
    return topic is not None and tp.partition in topic.partitions


def results_by_topic(errors: dict[TopicPartition, ErrorCode]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResult(partition_index=tp.partition, partition_error_code=code))
    return [TopicResult(name=name, results_by_partition=results)
            for name, results in by_topic.items()]
