"""What the transaction coordinator answers: InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn (as AddPartitionsToTxn of the group's
`__consumer_offsets` partition) and EndTxn, with Kafka's checks and error codes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Protocol

from brokercore.clock import Clock
from brokercore.controller.errors import ControllerError
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .metadata import TransactionMetadata
from .records import TxnRecord
from .state import TxnError, TxnState
from .table import TransactionTable

MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch this high takes a new producer id


class EndTransaction(Protocol):
    """The coordinator's ending of a transaction (while owning it): write PrepareCommit or
    PrepareAbort, at a bumped epoch if asked, then send the markers in the background."""

    def __call__(self, meta: TransactionMetadata, commit: bool,
                 bump_epoch: bool) -> Awaitable[None]: ...


class TransactionRequests:
    def __init__(self, table: TransactionTable, clock: Clock, max_timeout_ms: int,
                 end: EndTransaction, allocate_producer_id: Callable[[], Awaitable[int]]) -> None:
        self.table = table
        self.clock = clock
        self.max_timeout_ms = max_timeout_ms  # transaction.max.timeout.ms
        self.end = end
        self.allocate_producer_id = allocate_producer_id

    def _known(self, transactional_id: str, producer_id: int,
               producer_epoch: int) -> TransactionMetadata:
        meta = self.table.metadata(transactional_id)
        if meta is None or meta.record.producer_id != producer_id:
            raise TxnError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch != meta.record.producer_epoch:
            raise TxnError(ErrorCode.PRODUCER_FENCED,
                           f"epoch {producer_epoch}, current {meta.record.producer_epoch}")
        return meta

    # -- InitProducerId -------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        """(producer id, epoch) for a (re)starting transactional producer: the epoch goes up,
        so any older instance is fenced; its open transaction is aborted first."""
        if not transactional_id:
            raise TxnError(ErrorCode.INVALID_REQUEST, "empty transactional id")
        if not 0 < timeout_ms <= self.max_timeout_ms:
            raise TxnError(ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                           f"transaction.timeout.ms {timeout_ms} is not in "
                           f"(0, {self.max_timeout_ms}]")
        meta = self.table.metadata(transactional_id)
        if meta is None:  # new, or expired (a fresh producer id either way)
            meta = TransactionMetadata(transactional_id, self.table.partition_of(transactional_id),
                                       TxnRecord(-1, -1, timeout_ms, TxnState.EMPTY, frozenset(),
                                                 self.clock.time_ms()))
            self.table.txns[transactional_id] = meta
        record = meta.record
        if producer_id >= 0 and self._is_retry(meta, producer_id, producer_epoch):
            return record.producer_id, record.producer_epoch
        async with self.table.owning(meta):
            if record.state is TxnState.ONGOING:
                # Fence the old instance: abort its transaction at a new epoch; the new
                # producer retries (CONCURRENT_TRANSACTIONS) until the abort completes.
                await self.end(meta, commit=False, bump_epoch=True)
                raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
            if not record.state.completed:
                raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
            if record.producer_id < 0 or record.producer_epoch >= MAX_EPOCH - 1:
                new_id, new_epoch = await self._new_producer_id(), 0
            else:
                new_id, new_epoch = record.producer_id, record.producer_epoch + 1
            await self.table.transit(meta, TxnRecord(
                new_id, new_epoch, timeout_ms, TxnState.EMPTY, frozenset(),
                self.clock.time_ms(), -1))
            meta.last_producer_epoch = producer_epoch if new_id == producer_id else -1
        return new_id, new_epoch

    @staticmethod
    def _is_retry(meta: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
        """KIP-360: a producer that names its id and epoch asks for the next epoch. True if
        it already got it (a retry whose answer was lost); PRODUCER_FENCED if it is not
        the current producer. An id new to the coordinator (its state expired, say) is no
        one's yet: the producer gets a fresh producer id, as Kafka answers."""
        record = meta.record
        if record.producer_epoch < 0:
            return False
        if producer_id != record.producer_id:
            raise TxnError(ErrorCode.PRODUCER_FENCED, f"producer id {producer_id} is not "
                           f"{record.producer_id}")
        if producer_epoch == record.producer_epoch:
            return False
        if (producer_epoch >= 0 and producer_epoch == meta.last_producer_epoch
                and producer_epoch + 1 == record.producer_epoch
                and record.state is TxnState.EMPTY and not meta.pending):
            return True
        raise TxnError(ErrorCode.PRODUCER_FENCED,
                       f"epoch {producer_epoch}, current {record.producer_epoch}")

    async def _new_producer_id(self) -> int:
        try:
            return await self.allocate_producer_id()
        except ControllerError as exc:
            raise TxnError(ErrorCode.COORDINATOR_NOT_AVAILABLE, exc.message) from None

    # -- AddPartitionsToTxn, AddOffsetsToTxn ----------------------------------------------
    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: set[TopicPartition], exists: set[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """Per partition: NONE once the transaction includes it. `exists` are the
        partitions the cluster has; with one missing, none is added."""
        meta = self._known(transactional_id, producer_id, producer_epoch)
        record = meta.record
        if meta.pending or record.state.preparing:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        missing = partitions - exists
        if missing:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                    else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in partitions}
        if record.state is not TxnState.ONGOING or not partitions <= record.partitions:
            now = self.clock.time_ms()
            async with self.table.owning(meta):
                await self.table.transit(meta, dataclasses.replace(
                    record, state=TxnState.ONGOING, partitions=record.partitions | partitions,
                    start_ms=record.start_ms if record.state is TxnState.ONGOING else now,
                    last_update_ms=now))
        return dict.fromkeys(partitions, ErrorCode.NONE)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: set[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ `verify_only` (KIP-890), a partition leader asking before
        it appends a transaction's first batch: NONE for each partition the transaction has,
        TRANSACTION_ABORTABLE for the others (the leader tells older producers
        INVALID_TXN_STATE), as Kafka 4.0's coordinator answers. While the markers of a
        decided transaction go out, CONCURRENT_TRANSACTIONS: the producer asks again. A
        pending transition is not waited for: the leader's guard catches a marker that
        lands in between."""
        if not transactional_id:
            raise TxnError(ErrorCode.INVALID_REQUEST, "empty transactional id")
        record = self._known(transactional_id, producer_id, producer_epoch).record
        if record.state.preparing:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        # Only Ongoing has partitions: Empty and the Complete states hold none.
        return {tp: ErrorCode.NONE if tp in record.partitions
                else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}

    # -- EndTxn ---------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> None:
        meta = self._known(transactional_id, producer_id, producer_epoch)
        state = meta.record.state
        if meta.pending:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is TxnState.ONGOING:
            async with self.table.owning(meta):
                await self.end(meta, commit, bump_epoch=False)
            return
        # As Kafka answers transaction version 1: the decision already taken again is a retry
        # (CONCURRENT_TRANSACTIONS while its markers go out, then NONE); the other decision,
        # or either in Empty, is INVALID_TXN_STATE.
        if _DECIDED.get(state) is not commit:
            raise TxnError(ErrorCode.INVALID_TXN_STATE, f"cannot {'commit' if commit else 'abort'}"
                           f" in state {state.kafka_name}")
        if state.preparing:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)


# Whether a transaction in each state was decided to commit (True) or abort (False).
_DECIDED = {TxnState.PREPARE_COMMIT: True, TxnState.COMPLETE_COMMIT: True,
            TxnState.PREPARE_ABORT: False, TxnState.COMPLETE_ABORT: False}
