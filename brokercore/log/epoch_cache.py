"""Leader-epoch cache: the first offset written in each leader epoch (KIP-101)."""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from brokercore.log.checkpoint import read_checkpoint, write_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """(epoch, start_offset) pairs, both strictly increasing.

    On-disk format: ``leader-epoch-checkpoint`` in Kafka's checkpoint format (version
    ``0``, entry count, then ``<epoch> <start_offset>`` lines), rewritten atomically
    on every change. Changes are rare: a new leader epoch, truncation, log start moves.
    """

    FILE = "leader-epoch-checkpoint"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.FILE
        self.entries: list[tuple[int, int]] = [
            (entry[0], entry[1]) for entry in read_checkpoint(self.path) or []
        ]

    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; stale or repeated epochs are no-ops."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries = [entry for entry in self.entries if entry[1] < start_offset]
        self.entries.append((epoch, start_offset))
        self._persist()

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
            self._persist()

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

    def _persist(self) -> None:
        write_checkpoint(self.path, list(self.entries))
