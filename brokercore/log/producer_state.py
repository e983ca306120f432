"""Producer state for one partition (Kafka's ProducerStateManager, reduced).

For each producer id the log keeps its epoch and the metadata of its last five
batches. A Produce retry of one of those batches is answered with the original
offsets instead of being written twice; anything else out of sequence is refused.
It also keeps each producer's open transaction (the offset of its first transactional
batch since the last marker), from which the last stable offset follows, the
transactions that end (a control batch) in each append, and the verifications of
transactions in progress (KIP-890, `verification.py`).

A producer is forgotten once all its batches fall below the log start, or once it has
been idle for `producer.id.expiration.ms` (KIP-854): its last batch's max timestamp (a
marker's, for a marker) is that long ago and it has no open transaction. A producer
forgotten and writing again is new to the partition: any sequence is accepted (KIP-360).
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from brokercore.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from brokercore.log.records import INT32_MAX, RecordBatchHeader
from brokercore.log.transactions import CompletedTxn, ControlMarker
from brokercore.log.verification import SENTINEL, VerificationGuard, VerificationStateEntry

CACHED_BATCHES = 5  # Kafka's limit on in-flight requests per idempotent producer


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    current_txn_first_offset: int = -1  # -1: no open transaction
    coordinator_epoch: int = -1  # of the last marker written for this producer
    last_offset: int = -1  # of its last batch, marker or coordinator write included
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id, self.epoch, deque(self.batches, maxlen=CACHED_BATCHES),
            self.current_txn_first_offset, self.coordinator_epoch, self.last_offset,
            self.last_timestamp,
        )

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def record(self, header: RecordBatchHeader) -> None:
        """Remember a batch written at ``header.base_offset`` (already stamped)."""
        if header.producer_epoch != self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        self.last_offset = header.last_offset
        self.last_timestamp = header.max_timestamp
        if header.is_transactional and self.current_txn_first_offset < 0:
            self.current_txn_first_offset = header.base_offset
        if header.base_sequence < 0:
            return  # a coordinator's write (TxnOffsetCommit): no sequence to remember
        self.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )

    def end_txn(self, header: RecordBatchHeader, marker: ControlMarker) -> CompletedTxn | None:
        """A marker at ``header.base_offset`` ends the open transaction, if there is one."""
        if header.producer_epoch > self.epoch:
            self.epoch = header.producer_epoch
            self.batches.clear()
        self.coordinator_epoch = marker.coordinator_epoch
        self.last_offset = header.last_offset
        self.last_timestamp = header.max_timestamp
        first, self.current_txn_first_offset = self.current_txn_first_offset, -1
        if first < 0:
            return None
        return CompletedTxn(self.producer_id, first, header.base_offset, not marker.commit)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppend:
    """The producer-state changes of one record set, applied only if all of it is written."""

    def __init__(self, producers: dict[int, ProducerEntry], open_txns: dict[int, int],
                 verifications: dict[int, VerificationStateEntry]) -> None:
        self._producers = producers
        self._open_txns = open_txns
        self._verifications = verifications
        self.pending: dict[int, ProducerEntry] = {}
        self.completed: list[CompletedTxn] = []
        # Producers with a transactional batch or a marker in this append: whatever they
        # were verifying here is settled (a transaction is open now, or has ended).
        self._transactional: set[int] = set()

    def entry(self, producer_id: int) -> ProducerEntry | None:
        if producer_id in self.pending:
            return self.pending[producer_id]
        current = self._producers.get(producer_id)
        return current.copy() if current is not None else None

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        current = self._producers.get(header.producer_id)
        return current.find_duplicate(header) if current is not None else None

    def validate(self, header: RecordBatchHeader) -> None:
        """Kafka's epoch and sequence rules for a client (leader) append."""
        if header.base_sequence < 0:
            return  # a coordinator's own write, which carries no sequence
        entry = self.entry(header.producer_id)
        if entry is not None and header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} < {entry.epoch}"
            )
        self._check_not_overtaking(header)
        if entry is None:
            return  # unknown producer (new, or its data was deleted): any sequence (KIP-360)
        if not header.is_transactional and entry.current_txn_first_offset >= 0:
            # Kafka's ProducerAppendInfo: a plain write cannot join (or slip into) the
            # producer's open transaction here.
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {header.producer_id}: its "
                f"transaction is open at offset {entry.current_txn_first_offset}")
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} new epoch must start at sequence 0"
                )
            return
        if entry.batches and not in_sequence(entry.last_seq, header.base_sequence):
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id}: sequence {header.base_sequence} "
                f"does not follow {entry.last_seq}"
            )

    def _check_not_overtaking(self, header: RecordBatchHeader) -> None:
        """A batch must not overtake the lowest sequence a verification here started with;
        checked on the producer's first batch of the append, as Kafka checks its one batch."""
        verifying = self._verifications.get(header.producer_id)
        if (verifying is not None and header.producer_id not in self.pending
                and header.base_sequence > verifying.lowest_sequence):
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id}: sequence {header.base_sequence} is past "
                f"{verifying.lowest_sequence}, the earliest one being verified")

    def check_verified(self, header: RecordBatchHeader, guard: VerificationGuard) -> None:
        """A client's transactional batch continues its producer's open transaction here (at
        the same epoch), or carries the guard its verification started with (KIP-890)."""
        current = self._producers.get(header.producer_id)
        if (current is not None and current.current_txn_first_offset >= 0
                and current.epoch == header.producer_epoch):
            return
        verifying = self._verifications.get(header.producer_id)
        if verifying is None or not verifying.guard.verifies(guard):
            raise InvalidTxnStateError("Record was not part of an ongoing transaction")

    def validate_marker(self, header: RecordBatchHeader, coordinator_epoch: int) -> None:
        """A marker from a fenced producer epoch or an older coordinator is refused."""
        entry = self.entry(header.producer_id)
        if entry is None:
            return
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {header.producer_id} epoch {header.producer_epoch} "
                f"< {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"coordinator epoch {coordinator_epoch} < {entry.coordinator_epoch}")

    def record(self, header: RecordBatchHeader, marker: ControlMarker | None = None) -> None:
        entry = self.entry(header.producer_id) or ProducerEntry(
            header.producer_id, header.producer_epoch
        )
        if marker is not None:
            completed = entry.end_txn(header, marker)
            if completed is not None:
                self.completed.append(completed)
        elif not header.is_control:
            entry.record(header)
        if marker is not None or header.is_transactional:
            self._transactional.add(header.producer_id)
        self.pending[header.producer_id] = entry

    def first_unstable_offset(self) -> int | None:
        """As ``ProducerStateManager.first_unstable_offset``, with this append's changes."""
        open_txns = dict(self._open_txns)
        _track_open(open_txns, self.pending.values())
        return min(open_txns.values(), default=None)

    def commit(self) -> None:
        self._producers.update(self.pending)
        _track_open(self._open_txns, self.pending.values())
        self.pending = {}
        for producer_id in self._transactional:
            self._verifications.pop(producer_id, None)


def _track_open(open_txns: dict[int, int], entries: Iterable[ProducerEntry]) -> None:
    """Keep `open_txns` (producer id -> first offset of its open transaction) in step."""
    for entry in entries:
        if entry.current_txn_first_offset >= 0:
            open_txns[entry.producer_id] = entry.current_txn_first_offset
        else:
            open_txns.pop(entry.producer_id, None)


class ProducerStateManager:
    """Producers of one partition, rebuilt from the log on recovery.

    On-disk format: ``producer-state.snapshot``, written on clean close only — a JSON
    object ``{"offset": <log end offset>, "producers": [[pid, epoch, [[first_seq,
    last_seq, first_offset, last_offset, timestamp], ...], current_txn_first_offset,
    coordinator_epoch, last_offset, last_timestamp], ...]}``. It is used only if
    its offset equals the recovered log end offset; otherwise the state is rebuilt by
    scanning batch headers, so the log stays the source of truth. Either way the producers
    expired by then (`remove_expired`) are left out.
    """

    SNAPSHOT = "producer-state.snapshot"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.SNAPSHOT
        self.producers: dict[int, ProducerEntry] = {}
        # producer id -> the first offset of its open transaction: the last stable offset
        # is asked on every fetch, so it must not cost a pass over every producer.
        self.open_txns: dict[int, int] = {}
        # In memory only, as in Kafka: a new leader verifies again. An entry whose
        # verification failed stays until the producer's next transactional write here.
        self.verifications: dict[int, VerificationStateEntry] = {}

    def begin(self) -> ProducerAppend:
        return ProducerAppend(self.producers, self.open_txns, self.verifications)

    def reset(self) -> None:
        self.producers = {}
        self.open_txns = {}
        self.verifications = {}

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset >= 0
                and entry.epoch == producer_epoch)

    def maybe_start_verification(self, producer_id: int, sequence: int, epoch: int,
                                 now_ms: int) -> VerificationGuard:
        """The guard an append must carry once the coordinator has verified the transaction;
        SENTINEL when the transaction is open here already and needs no verification.
        Verifications of one producer in progress at once share a guard."""
        if self.has_ongoing_transaction(producer_id, epoch):
            return SENTINEL
        entry = self.verifications.get(producer_id)
        if entry is None:
            entry = VerificationStateEntry(VerificationGuard(), sequence, epoch, now_ms)
            self.verifications[producer_id] = entry
        else:
            entry.update(sequence, epoch)
        return entry.guard

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction; None if none is open."""
        return min(self.open_txns.values(), default=None)

    def _reindex(self) -> None:
        self.open_txns = {}
        _track_open(self.open_txns, self.producers.values())

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's `removeExpiredProducers`: forget the producers idle for `expiration_ms`
        (none with an open transaction) and the verifications started that long ago. The
        number of producers forgotten."""
        expired = [pid for pid, entry in self.producers.items()
                   if _expired(entry, now_ms, expiration_ms)]
        for pid in expired:
            del self.producers[pid]
        for pid in [pid for pid, verifying in self.verifications.items()
                    if now_ms - verifying.timestamp >= expiration_ms]:
            del self.verifications[pid]
        return len(expired)

    def remove_before(self, log_start_offset: int) -> None:
        """Forget producers whose every batch now lies below the log start."""
        self.producers = {
            pid: entry
            for pid, entry in self.producers.items()
            if entry.last_offset >= log_start_offset
        }
        self._reindex()

    def load_snapshot(self, log_end_offset: int, now_ms: int, expiration_ms: int) -> bool:
        """The clean-close snapshot, if it is of `log_end_offset`, without the producers that
        expired meanwhile (as Kafka loads a snapshot)."""
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return False
        if data.get("offset") != log_end_offset:
            return False
        self.producers = {}
        for pid, epoch, batches, *txn in data["producers"]:
            if len(txn) != 4:
                return False  # a snapshot from before transactions: rebuild from the log
            entry = ProducerEntry(pid, epoch, current_txn_first_offset=txn[0],
                                  coordinator_epoch=txn[1], last_offset=txn[2],
                                  last_timestamp=txn[3])
            entry.batches.extend(BatchMetadata(*batch) for batch in batches)
            if not _expired(entry, now_ms, expiration_ms):
                self.producers[pid] = entry
        self._reindex()
        return True

    def write_snapshot(self, log_end_offset: int) -> None:
        producers = [
            [pid, entry.epoch, [list(_fields(batch)) for batch in entry.batches],
             entry.current_txn_first_offset, entry.coordinator_epoch, entry.last_offset,
             entry.last_timestamp]
            for pid, entry in self.producers.items()
        ]
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"offset": log_end_offset, "producers": producers}))
        os.replace(temporary, self.path)

    def delete_snapshot(self) -> None:
        self.path.unlink(missing_ok=True)


def _expired(entry: ProducerEntry, now_ms: int, expiration_ms: int) -> bool:
    """Kafka's isProducerExpired: no open transaction, and its last write's timestamp is
    `expiration_ms` old or more."""
    return (entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= expiration_ms)


def _fields(batch: BatchMetadata) -> tuple[int, int, int, int, int]:
    return (batch.first_seq, batch.last_seq, batch.first_offset, batch.last_offset, batch.timestamp)
