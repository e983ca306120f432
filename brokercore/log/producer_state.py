"""Idempotent-producer state for one partition (Kafka's ProducerStateManager, reduced).

For each producer id the log keeps its epoch and the metadata of its last five
batches. A Produce retry of one of those batches is answered with the original
offsets instead of being written twice; anything else out of sequence is refused.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from brokercore.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from brokercore.log.records import INT32_MAX, RecordBatchHeader

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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id, self.epoch, deque(self.batches, maxlen=CACHED_BATCHES)
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
        self.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppend:
    """The producer-state changes of one record set, applied only if all of it is written."""

    def __init__(self, producers: dict[int, ProducerEntry]) -> None:
        self._producers = producers
        self.pending: dict[int, ProducerEntry] = {}

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
        entry = self.entry(header.producer_id)
        if entry is None:
            return  # unknown producer (new, or its data was deleted): any sequence (KIP-360)
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} < {entry.epoch}"
            )
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

    def record(self, header: RecordBatchHeader) -> None:
        entry = self.entry(header.producer_id) or ProducerEntry(
            header.producer_id, header.producer_epoch
        )
        entry.record(header)
        self.pending[header.producer_id] = entry

    def commit(self) -> None:
        self._producers.update(self.pending)
        self.pending = {}


class ProducerStateManager:
    """Producers of one partition, rebuilt from the log on recovery.

    On-disk format: ``producer-state.snapshot``, written on clean close only — a JSON
    object ``{"offset": <log end offset>, "producers": [[pid, epoch, [[first_seq,
    last_seq, first_offset, last_offset, timestamp], ...]], ...]}``. It is used only if
    its offset equals the recovered log end offset; otherwise the state is rebuilt by
    scanning batch headers, so the log stays the source of truth.
    """

    SNAPSHOT = "producer-state.snapshot"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.SNAPSHOT
        self.producers: dict[int, ProducerEntry] = {}

    def begin(self) -> ProducerAppend:
        return ProducerAppend(self.producers)

    def rebuild(self, headers: Iterable[RecordBatchHeader]) -> None:
        self.producers = {}
        append = self.begin()
        for header in headers:
            if header.has_producer_id:
                append.record(header)
        append.commit()

    def remove_before(self, log_start_offset: int) -> None:
        """Forget producers whose every batch now lies below the log start."""
        self.producers = {
            pid: entry
            for pid, entry in self.producers.items()
            if entry.last_offset >= log_start_offset
        }

    def load_snapshot(self, log_end_offset: int) -> bool:
        try:
            data = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):
            return False
        if data.get("offset") != log_end_offset:
            return False
        self.producers = {}
        for pid, epoch, batches in data["producers"]:
            entry = ProducerEntry(pid, epoch)
            entry.batches.extend(BatchMetadata(*batch) for batch in batches)
            self.producers[pid] = entry
        return True

    def write_snapshot(self, log_end_offset: int) -> None:
        producers = [
            [pid, entry.epoch, [list(_fields(batch)) for batch in entry.batches]]
            for pid, entry in self.producers.items()
        ]
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"offset": log_end_offset, "producers": producers}))
        os.replace(temporary, self.path)

    def delete_snapshot(self) -> None:
        self.path.unlink(missing_ok=True)


def _fields(batch: BatchMetadata) -> tuple[int, int, int, int, int]:
    return (batch.first_seq, batch.last_seq, batch.first_offset, batch.last_offset, batch.timestamp)
