"""KIP-890 part 1 for Produce: which partitions of a request the transaction coordinator
must vouch for before their batches are appended, and what the producer is answered when
it does not, as Kafka 4.0's partition leaders answer transaction-version-1 producers.

A partition needs verifying when its first batch is transactional and the producer has no
transaction open there at that epoch (Kafka's hasOngoingTransaction): the first write of a
transaction, or a zombie's late write after its transaction ended. Starting verification
gives the partition's guard (`brokercore/log/verification.py`); the append must carry it.
Every other partition appends at once, carrying the sentinel guard, which the log accepts
only while the producer's transaction stays open there.

With `transaction.partition.verification.enable` false, nothing is verified and appends
carry no guard: transactional batches are appended as before KIP-890.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from brokercore.handlers.parts import BrokerParts
from brokercore.log import RecordBatchHeader
from brokercore.log.records import ATTRIBUTES_AT, HEADER_SIZE, TRANSACTIONAL_FLAG
from brokercore.log.verification import SENTINEL, VerificationGuard
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError
from brokercore.topic_partition import TopicPartition

ENABLE = "transaction.partition.verification.enable"
MAGIC_AT = 16
# The first Produce version whose producers know TRANSACTION_ABORTABLE (KIP-890); older
# ones are answered INVALID_TXN_STATE instead, as Kafka does. v12 is v11 here.
FIRST_ABORTABLE_VERSION = 11
# What the coordinator answers when it cannot tell yet. Transaction-version-1 producers do
# not all retry these on a write, so Kafka answers them NOT_ENOUGH_REPLICAS, which every
# producer retries and which does not make it refresh its metadata.
UNVERIFIABLE = frozenset({
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
})


@dataclass(frozen=True)
class Refusal:
    error_code: ErrorCode
    message: str


@dataclass(frozen=True)
class Verification:
    """One Produce request's verification: `guards` are the partitions waiting for the
    coordinator, `refused` those that will not be appended, with their answer."""

    enforce: bool
    transactional_id: str | None = None
    producer: tuple[int, int] = (-1, -1)  # producer id and epoch
    guards: Mapping[TopicPartition, VerificationGuard] = field(default_factory=dict)
    refused: Mapping[TopicPartition, Refusal] = field(default_factory=dict)

    def guard(self, tp: TopicPartition) -> VerificationGuard | None:
        """What the partition's append carries (None: no verification is enforced)."""
        if not self.enforce:
            return None
        return self.guards.get(tp, SENTINEL) if self.guards else SENTINEL


OFF = Verification(enforce=False)
NOTHING_TO_VERIFY = Verification(enforce=True)


def start(broker: BrokerParts, request: Any) -> Verification:
    """Look at each partition's first batch header and start the verifications needed.
    Synchronous: a request that needs none appends before its first await."""
    firsts = [(TopicPartition(topic.name, p.index), header)
              for topic in request.topic_data for p in topic.partition_data
              if (header := _transactional_header(p.records)) is not None]
    if not firsts:
        return NOTHING_TO_VERIFY if broker.config.get_bool(ENABLE) else OFF
    every = [TopicPartition(topic.name, p.index)
             for topic in request.topic_data for p in topic.partition_data]
    # Kafka refuses these requests whole, verification or not.
    if request.transactional_id is None:
        return _refuse_all(every, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           "transactional records in a request without a transactional id")
    producers = {(h.producer_id, h.producer_epoch) for _, h in firsts}
    if len(producers) > 1:
        return _refuse_all(every, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                           "transactional records of more than one producer id")
    if not broker.config.get_bool(ENABLE):
        return OFF
    [(producer_id, producer_epoch)] = producers
    guards = {}
    for tp, header in firsts:
        try:
            partition = broker.replicas.leader_partition(tp)
        except PartitionError:
            continue  # its append answers why
        guard = partition.maybe_start_transaction_verification(
            producer_id, header.base_sequence, producer_epoch)
        if guard is not SENTINEL:
            guards[tp] = guard
    if not guards:
        return NOTHING_TO_VERIFY
    return Verification(True, request.transactional_id, (producer_id, producer_epoch), guards)


async def finish(broker: BrokerParts, verification: Verification,
                 api_version: int) -> Verification:
    """Ask the coordinator about the partitions `start` left waiting; those it does not
    vouch for are refused, the others append with their guards."""
    assert verification.transactional_id is not None
    errors = await broker.verifier.verify(
        verification.transactional_id, *verification.producer,
        frozenset(verification.guards))
    refused = {tp: produce_refusal(code, api_version) for tp, code in errors.items()}
    return dataclasses.replace(verification, refused={**verification.refused, **refused})


def produce_refusal(code: ErrorCode, api_version: int) -> Refusal:
    """A failed verification as the producer is answered (Kafka 4.0's translations)."""
    if code == ErrorCode.TRANSACTION_ABORTABLE and api_version < FIRST_ABORTABLE_VERSION:
        code = ErrorCode.INVALID_TXN_STATE
    if code in UNVERIFIABLE:
        return Refusal(ErrorCode.NOT_ENOUGH_REPLICAS,
                       f"the transaction could not be verified with its coordinator "
                       f"({code.name}); retry")
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        return Refusal(code, "the transaction coordinator does not have this partition "
                             "in an ongoing transaction of this producer")
    return Refusal(code, f"transaction verification failed: {code.name}")


def _transactional_header(records: Any) -> RecordBatchHeader | None:
    """The first batch's header if it is a v2 transactional batch; anything else (not
    transactional, or malformed: the log refuses it) needs no verification."""
    if (not records or len(records) < HEADER_SIZE or records[MAGIC_AT] != 2
            or not records[ATTRIBUTES_AT + 1] & TRANSACTIONAL_FLAG):
        return None
    header = RecordBatchHeader.unpack(records)
    return header if header.has_producer_id and not header.is_control else None


def _refuse_all(partitions: list[TopicPartition], code: ErrorCode,
                message: str) -> Verification:
    refusal = Refusal(code, message)
    return Verification(enforce=True, refused=dict.fromkeys(partitions, refusal))
