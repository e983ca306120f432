"""The transactional ids one coordinator serves, and the writes of their transitions.

An id lives on the `__transaction_state` partition of its hash (`partition_of`) and is
served only while this broker leads that partition and has loaded it (`metadata`). Every
change of an id's state goes through `transit`: the table of legal transitions is checked,
the record is written, and the state changes in memory only once the in-sync replicas have
it. While it is written the id is `pending` (`owning`), and other requests for it get
CONCURRENT_TRANSACTIONS.

`TransactionCoordinator` owns this table, fills it by replaying the log and empties it when
a partition is lost; `TransactionRequests` is handed it, and finds, creates and changes ids
through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from brokercore.clock import Clock
from brokercore.coordinator.state import GroupError
from brokercore.protocol.errors import ErrorCode

from .metadata import TransactionMetadata
from .records import TxnRecord, encode_key, encode_value, partition_for
from .state import VALID_PREVIOUS_STATES, TxnError
from .state_topic import TransactionStore


class TransactionTable:
    def __init__(self, store: TransactionStore, check: Callable[[int], ErrorCode], clock: Clock,
                 write_timeout_ms: int) -> None:
        self.store = store
        self._check = check  # the partition's loading: NONE, or why it is not served here
        self.clock = clock
        self.write_timeout_ms = write_timeout_ms
        self.txns: dict[str, TransactionMetadata] = {}

    # -- which transactional ids are ours ---------------------------------------------------
    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.store.num_partitions)

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's state if this broker coordinates it; NOT_COORDINATOR otherwise, and
        COORDINATOR_LOAD_IN_PROGRESS while its partition loads."""
        code = self._check(self.partition_of(transactional_id))
        if code != ErrorCode.NONE:
            raise TxnError(code)
        return self.txns.get(transactional_id)

    # -- transitions ------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def owning(self, meta: TransactionMetadata) -> AsyncIterator[None]:
        """Exclusive use of one transaction while it changes."""
        if meta.pending:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS)
        meta.pending = True
        try:
            yield
        finally:
            meta.pending = False

    async def transit(self, meta: TransactionMetadata, new: TxnRecord) -> None:
        """Write the new state and apply it once the in-sync replicas have it."""
        if meta.record.state not in VALID_PREVIOUS_STATES[new.state]:
            raise TxnError(ErrorCode.INVALID_TXN_STATE,
                           f"{meta.record.state.kafka_name} -> {new.state.kafka_name}")
        key = encode_key(meta.transactional_id)
        try:
            offset = self.store.append(meta.partition, [(key, encode_value(new))],
                                       self.clock.time_ms())
            await self.store.wait_replicated(meta.partition, offset, self.write_timeout_ms)
        except GroupError as exc:
            # As Kafka maps a failed write to the state log: the partition's leadership moved
            # means the coordinator did (clients look it up again and retry there); anything
            # else is a coordinator not available for now. NOT_LEADER_OR_FOLLOWER would make
            # librdkafka abort a transaction whose PrepareCommit may yet complete.
            code = (ErrorCode.NOT_COORDINATOR
                    if exc.error_code in (ErrorCode.NOT_COORDINATOR,
                                          ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    else ErrorCode.COORDINATOR_NOT_AVAILABLE)
            raise TxnError(code, str(exc)) from None
        if self.txns.get(meta.transactional_id) is not meta:
            raise TxnError(ErrorCode.NOT_COORDINATOR, "the partition moved meanwhile")
        meta.record = new
