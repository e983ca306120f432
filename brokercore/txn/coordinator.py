"""The transaction coordinator of one broker: the transactional ids whose
`__transaction_state` partition it leads.

It builds the table of transactional ids (`TransactionTable`, `table.py`) and the requests'
logic (`TransactionRequests`, `requests.py`), and hands the requests the table, the clock,
the settings and the ending of a transaction they use; they never reach back to this
class. Everything runs on the event loop. Every transition is written to the log and
applied only once the in-sync replicas have it (`TransactionTable.transit`), so a
coordinator that takes over after a failover replays exactly what clients were told.
Requests decide; ending a transaction (markers, then the Complete state) runs here, in the
background, and so do timeouts and the expiration of ids.

Partitions are followed and loaded as the group coordinator's are (`PartitionedCoordinator`):
in slices, the ids installed only at the end; meanwhile their requests get
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from brokercore.clock import Clock
from brokercore.config import BrokerConfig
from brokercore.coordinator.loading import PartitionedCoordinator, Slices
from brokercore.coordinator.state import GroupError
from brokercore.protocol.errors import ErrorCode

from .markers import MarkerWriter
from .metadata import TransactionMetadata
from .records import TxnRecord, encode_key
from .requests import TransactionRequests
from .state import VALID_PREVIOUS_STATES, TxnError, TxnState
from .state_topic import TRANSACTION_STATE_TOPIC, TransactionStore
from .table import TransactionTable

log = logging.getLogger(__name__)
RETRY_SECONDS = 0.1
# Tombstones per write, in key bytes: a batch well under `max.message.bytes` (1 MiB by
# default), as Kafka fills each tombstone batch only up to the log's largest message.
TOMBSTONE_BATCH_BYTES = 256 * 1024


@dataclass(frozen=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    abort_interval_ms: int = 10_000
    write_timeout_ms: int = 5000
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    remove_expired_interval_ms: int = 3_600_000

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> TxnConfig:
        return cls(
            max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            abort_interval_ms=config.get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            write_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
            id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
            remove_expired_interval_ms=config.get_int(
                "transaction.remove.expired.transaction.cleanup.interval.ms"),
        )


class TransactionCoordinator(PartitionedCoordinator):
    topic = TRANSACTION_STATE_TOPIC
    store: TransactionStore

    def __init__(
        self, store: TransactionStore, clock: Clock, config: TxnConfig,
        markers: MarkerWriter, allocate_producer_id: Callable[[], Awaitable[int]],
    ) -> None:
        super().__init__(store)
        self.clock = clock
        self.config = config
        self.markers = markers
        self.table = TransactionTable(store, self.partitions.check, clock,
                                      config.write_timeout_ms)
        self._next_abort = clock.monotonic()
        # As Kafka schedules it: the first sweep one interval after the start.
        self._next_expire = clock.monotonic() + config.remove_expired_interval_ms / 1000
        self.requests = TransactionRequests(self.table, clock, config.max_timeout_ms, self.end,
                                            allocate_producer_id)

    # -- lifecycle ------------------------------------------------------------------------
    async def stop(self) -> None:
        await super().stop()
        self.markers.close()

    def tick(self) -> None:
        super().tick()
        if self.clock.monotonic() >= self._next_abort:
            self._next_abort = self.clock.monotonic() + self.config.abort_interval_ms / 1000
            self.abort_timed_out()
        if self.clock.monotonic() >= self._next_expire:
            self._next_expire = (self.clock.monotonic()
                                 + self.config.remove_expired_interval_ms / 1000)
            self.remove_expired_ids()

    # -- which transactional ids are ours ---------------------------------------------------
    @property
    def txns(self) -> dict[str, TransactionMetadata]:
        return self.table.txns

    def partition_of(self, transactional_id: str) -> int:
        return self.table.partition_of(transactional_id)

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        return self.table.metadata(transactional_id)

    def load_partition(self, partition: int, epoch: int) -> Slices:
        """Replay the partition, yielding between slices; the ids appear at the end."""
        states: dict[str, TxnRecord] = {}
        for n, (transactional_id, record) in enumerate(self.store.replay_states(partition), 1):
            if record is None:
                states.pop(transactional_id, None)
            else:
                states[transactional_id] = record
            if n % self.load_slice_records == 0:
                yield
        for transactional_id, record in states.items():
            meta = TransactionMetadata(transactional_id, partition, record)
            self.txns[transactional_id] = meta
            if record.state.preparing:  # decided before the failover: finish it
                self._spawn(self.complete(meta))
        log.info("loaded __transaction_state-%d in leader epoch %d: %d transactional id(s)",
                 partition, epoch, len(states))

    def unload_partition(self, partition: int) -> None:
        for meta in [m for m in self.txns.values() if m.partition == partition]:
            del self.txns[meta.transactional_id]

    # -- ending transactions ------------------------------------------------------------------
    async def end(self, meta: TransactionMetadata, commit: bool, bump_epoch: bool) -> None:
        """Prepare to commit or abort (while owning `meta`), then finish in the background.
        A bumped epoch fences the producer: its late writes are refused everywhere."""
        record = meta.record
        await self.table.transit(meta, dataclasses.replace(
            record, producer_epoch=record.producer_epoch + (1 if bump_epoch else 0),
            state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
            last_update_ms=self.clock.time_ms()))
        self._spawn(self.complete(meta))

    async def complete(self, meta: TransactionMetadata) -> None:
        """Send the markers of a prepared transaction until every partition has its own,
        then write the Complete state. Stops when this broker stops coordinating it."""
        prepared = meta.record
        commit = prepared.state is TxnState.PREPARE_COMMIT
        remaining = set(prepared.partitions)
        while self.txns.get(meta.transactional_id) is meta:
            coordinator_epoch = self.partitions.epochs.get(meta.partition, -1)
            if remaining:
                try:
                    remaining -= await self.markers.write(
                        prepared.producer_id, prepared.producer_epoch, commit,
                        coordinator_epoch, frozenset(remaining))
                except Exception:  # a bug must not leave the transaction prepared for good
                    log.exception("transaction %s: sending markers failed",
                                  meta.transactional_id)
            if not remaining and not meta.pending:
                try:
                    async with self.table.owning(meta):
                        await self.table.transit(meta, dataclasses.replace(
                            prepared,
                            state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                            partitions=frozenset(), last_update_ms=self.clock.time_ms()))
                    return
                except TxnError as exc:
                    log.info("transaction %s: cannot complete yet: %s",
                             meta.transactional_id, exc)
            await asyncio.sleep(RETRY_SECONDS)

    # -- expiry -----------------------------------------------------------------------------
    def abort_timed_out(self) -> None:
        """Abort, fencing the producer, every open transaction past its timeout."""
        for meta in list(self.txns.values()):
            if self._timed_out(meta):
                self._spawn(self._abort_quietly(meta))

    def _timed_out(self, meta: TransactionMetadata) -> bool:
        record = meta.record
        return (record.state is TxnState.ONGOING and not meta.pending
                and record.start_ms + record.timeout_ms < self.clock.time_ms())

    async def _abort_quietly(self, meta: TransactionMetadata) -> None:
        if not self._timed_out(meta):
            return  # it ended (or another began) since the sweep
        log.info("transaction %s: timed out after %d ms; aborting", meta.transactional_id,
                 meta.record.timeout_ms)
        try:
            async with self.table.owning(meta):
                await self.end(meta, commit=False, bump_epoch=True)
        except TxnError as exc:
            log.info("transaction %s: abort failed: %s", meta.transactional_id, exc)

    # -- transactional id expiration ----------------------------------------------------------
    def remove_expired_ids(self) -> None:
        """Kafka's removal of expired transactional ids: each id in Empty, CompleteCommit or
        CompleteAbort (the states it may go Dead from) whose last update is
        `transactional.id.expiration.ms` old gets a tombstone in its partition."""
        now = self.clock.time_ms()
        expired: dict[int, list[TransactionMetadata]] = defaultdict(list)
        for meta in self.txns.values():
            if self._expired(meta, now):
                expired[meta.partition].append(meta)
        for partition, metas in expired.items():
            for batch in _tombstone_batches(metas):
                for meta in batch:
                    meta.pending = True  # Kafka's pending Dead: other requests wait
                self._spawn(self._remove(partition, batch))

    def _expired(self, meta: TransactionMetadata, now: int) -> bool:
        record = meta.record
        return (record.state in VALID_PREVIOUS_STATES[TxnState.DEAD] and not meta.pending
                and record.last_update_ms <= now - self.config.id_expiration_ms)

    async def _remove(self, partition: int, metas: list[TransactionMetadata]) -> None:
        """Write the ids' tombstones; once the in-sync replicas have them, the ids leave
        memory, so a coordinator that takes over never finds them again. If the write
        fails, they stay, for the next sweep."""
        try:
            offset = self.store.append(
                partition, [(encode_key(m.transactional_id), None) for m in metas],
                self.clock.time_ms())
            await self.store.wait_replicated(partition, offset, self.config.write_timeout_ms)
        except GroupError as exc:
            log.warning("__transaction_state-%d: cannot remove %d expired transactional "
                        "id(s): %s", partition, len(metas), exc)
            return
        finally:
            for meta in metas:
                meta.pending = False
        removed = [m for m in metas if self.txns.get(m.transactional_id) is m]
        for meta in removed:  # the others went with their partition meanwhile
            del self.txns[meta.transactional_id]
        log.info("__transaction_state-%d: removed %d expired transactional id(s)",
                 partition, len(removed))

    # -- DescribeTransactions, ListTransactions ---------------------------------------------
    def list_transactions(self) -> list[TransactionMetadata]:
        """COORDINATOR_LOAD_IN_PROGRESS while any partition loads, as Kafka answers."""
        code = self.check_loading_all()
        if code != ErrorCode.NONE:
            raise TxnError(code)
        return [m for m in self.txns.values() if m.record.producer_id >= 0]


def _tombstone_batches(
    metas: list[TransactionMetadata],
) -> list[list[TransactionMetadata]]:
    """The ids in runs whose keys fit TOMBSTONE_BATCH_BYTES, one write each."""
    batches: list[list[TransactionMetadata]] = [[]]
    size = 0
    for meta in metas:
        key_bytes = len(encode_key(meta.transactional_id))
        if batches[-1] and size + key_bytes > TOMBSTONE_BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(meta)
        size += key_bytes
    return batches
