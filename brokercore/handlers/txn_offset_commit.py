"""TxnOffsetCommit (28): a transaction's consumed offsets, sent to the group's coordinator.

They are written to `__consumer_offsets` as a transactional batch of the producer and
count only once the transaction commits (its marker reaches the partition); see
`brokercore/coordinator/offsets.py`. v3+ carry the consumer's generation and member,
checked as OffsetCommit checks them.

With `transaction.partition.verification.enable` (KIP-890 part 1), the write is verified as
Kafka 4.0's group coordinator verifies it: unless the producer's transaction is open on the
group's partition already, the transaction coordinator must confirm that the transaction
includes that partition (AddPartitionsToTxn `verify_only`, as for Produce). A commit it does
not vouch for (a zombie's, after its transaction ended; one never added with
AddOffsetsToTxn) is refused with INVALID_TXN_STATE, and one it cannot answer yet with
COORDINATOR_NOT_AVAILABLE, which clients retry.
"""

from typing import Any

from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from brokercore.coordinator.offsets_topic import OFFSETS_TOPIC
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.produce_verification import ENABLE, UNVERIFIABLE
from brokercore.handlers.registry import serves
from brokercore.log.verification import SENTINEL, VerificationGuard
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

TopicResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResponse = TopicResponse.TxnOffsetCommitResponsePartition


@serves(TxnOffsetCommitRequest, TxnOffsetCommitResponse, min_version=0, max_version=4)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    v3 = ctx.api_version >= 3
    refusal = _refusal(broker, ctx, request)
    if refusal is not None:
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
            TopicResponse(name=t.name, partitions=[
                PartitionResponse(partition_index=p.partition_index,
                                  error_code=refusal.get(t.name, refusal.get("")))
                for p in t.partitions])
            for t in request.topics])
    commits = {
        TopicPartition(t.name, p.partition_index): (
            p.committed_offset, p.committed_leader_epoch if ctx.api_version >= 2 else -1,
            p.committed_metadata)
        for t in request.topics for p in t.partitions
    }
    producer = (request.producer_id, request.producer_epoch)
    guard, refused = await _verify(broker, request, producer)
    if refused is not None:
        errors = dict.fromkeys(commits, refused)
    else:
        errors = await broker.groups.offsets.txn_commit(
            request.group_id, producer,
            request.generation_id if v3 else -1, request.member_id if v3 else "",
            request.group_instance_id if v3 else None, commits, guard)
    by_topic: dict[str, list[Any]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResponse(partition_index=tp.partition, error_code=code))
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[TopicResponse(name=name, partitions=parts) for name, parts in by_topic.items()])


async def _verify(broker: BrokerParts, request: Any, producer: tuple[int, int]
                  ) -> tuple[VerificationGuard | None, ErrorCode | None]:
    """The guard the write carries, or the error every partition is answered with."""
    if not broker.config.get_bool(ENABLE):
        return None, None
    guard = broker.groups.offsets.start_txn_verification(request.group_id, producer)
    if guard is None or guard is SENTINEL:
        return guard, None
    partition = TopicPartition(OFFSETS_TOPIC, broker.groups.partition_of(request.group_id))
    errors = await broker.verifier.verify(request.transactional_id, *producer,
                                          frozenset({partition}))
    if partition not in errors:
        return guard, None
    code = errors[partition]
    # Kafka 4.0's answers to transaction-version-1 clients (TxnOffsetCommit before v5):
    # TRANSACTION_ABORTABLE is INVALID_TXN_STATE; a coordinator that cannot tell yet is
    # NOT_ENOUGH_REPLICAS on the write, which the group coordinator answers as
    # COORDINATOR_NOT_AVAILABLE.
    if code == ErrorCode.TRANSACTION_ABORTABLE:
        return guard, ErrorCode.INVALID_TXN_STATE
    if code in UNVERIFIABLE:
        return guard, ErrorCode.COORDINATOR_NOT_AVAILABLE
    return guard, code


def _refusal(broker: BrokerParts, ctx: RequestContext, request: Any
             ) -> dict[str, ErrorCode] | None:
    """Kafka's checks: WRITE on the transactional id, READ on the group (each failing every
    partition, keyed ""), READ on each topic; None when all pass."""
    authorizer = broker.authorizer
    if not authorizer.authorize_transactional_id(ctx, AclOperation.WRITE,
                                                 request.transactional_id):
        return {"": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not authorizer.authorize_group(ctx, AclOperation.READ, request.group_id):
        return {"": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    denied = {t.name for t in request.topics
              if not authorizer.authorize_topic(ctx, AclOperation.READ, t.name)}
    if not denied:
        return None
    return {t.name: ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.name in denied
            else ErrorCode.OPERATION_NOT_ATTEMPTED for t in request.topics}
