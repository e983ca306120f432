"""Leader-epoch cache: the first offset written in each leader epoch (KIP-101)."""

from __future__ import annotations

import threading
from bisect import bisect_right
from pathlib import Path

from brokercore.log.checkpoint import read_checkpoint, write_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """(epoch, start_offset) pairs, both strictly increasing.

    On-disk format: ``leader-epoch-checkpoint`` in Kafka's checkpoint format (version
    ``0``, entry count, then ``<epoch> <start_offset>`` lines), rewritten atomically
    on every change but one. Changes are rare: a new leader epoch, truncation, log start
    moves. A move of the log start is written with the next change or flush (Kafka's
    truncateFromStartAsyncFlush): the log start it follows is itself restored at open,
    which clamps the epochs again, so a crash before the write loses nothing.

    A new leadership may defer its write (`assign(..., persist=False)`): the replica
    manager then writes a `snapshot()` on a disk thread (`persist`), so a failover of many
    partitions does not fsync on the event loop. Writes are serialized and versioned: a
    snapshot older than what is on disk is dropped. The log persists a deferred change
    before it moves its recovery point, and recovery re-learns epochs from the batches
    past it, so a crash before the write loses no epoch that has records (as Kafka since
    KAFKA-15046).
    """

    FILE = "leader-epoch-checkpoint"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.FILE
        self.entries: list[tuple[int, int]] = [
            (entry[0], entry[1]) for entry in read_checkpoint(self.path) or []
        ]
        self._version = 0  # of `entries`, bumped by every change
        self._written = 0  # the version on disk
        self._write_lock = threading.Lock()

    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int, *, persist: bool = True) -> None:
        """Record that ``epoch`` starts at ``start_offset``; stale or repeated epochs are
        no-ops. Without `persist` the change is only in memory until `persist()`."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries = [entry for entry in self.entries if entry[1] < start_offset]
        self.entries.append((epoch, start_offset))
        self._version += 1
        if persist:
            self.persist()

    def truncate_from_end(self, end_offset: int) -> None:
        """After truncating the log to ``end_offset``: drop epochs starting at or after it."""
        kept = [entry for entry in self.entries if entry[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """After the log start moves: epochs wholly below it go, the one spanning it is clamped."""
        below = [entry for entry in self.entries if entry[1] < start_offset]
        if not below:
            return
        rest = self.entries[len(below) :]
        if rest and rest[0][1] == start_offset:
            kept = rest
        else:
            kept = [(below[-1][0], start_offset), *rest]
        if kept != self.entries:
            self.entries = kept
            self._version += 1  # written by the next `persist` (the log's next flush)

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (largest epoch <= requested, its end offset)."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        epochs = [entry[0] for entry in self.entries]
        higher = bisect_right(epochs, epoch)
        if higher == len(self.entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self.entries[0][1]
        return self.entries[higher - 1][0], self.entries[higher][1]

    def clear(self) -> None:
        self.entries = []
        self._persist()

    @property
    def dirty(self) -> bool:
        """A change is not on disk yet."""
        return self._written != self._version

    def snapshot(self) -> tuple[int, list[tuple[int, int]]]:
        """The entries and their version, taken on the loop for `persist` on a thread."""
        return self._version, list(self.entries)

    def persist(self, snapshot: tuple[int, list[tuple[int, int]]] | None = None) -> None:
        """Write the entries (or a snapshot of them); any thread. Nothing if the file
        already holds that version or a newer one."""
        version, entries = snapshot if snapshot is not None else self.snapshot()
        with self._write_lock:
            if version <= self._written:
                return
            write_checkpoint(self.path, entries)
            self._written = version

    def _persist(self) -> None:
        self._version += 1
        self.persist()
