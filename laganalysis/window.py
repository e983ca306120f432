"""The per-partition sample window Burrow evaluates: the last N commits and broker end offsets.

Burrow keeps, for each group/topic/partition, a ring of the last ``intervals`` (default 10)
commits; a commit closer than ``min_distance`` seconds to the previous one overwrites that slot
(keeping the slot's timestamp, so a consumer committing faster than ``min_distance`` does not
push the window forward on every commit). Beside it Burrow keeps the last ``intervals`` broker
end offsets, which ``checkIfRecentLagZero`` consults. :class:`PartitionWindow` is both rings as
one immutable value; every change returns a new window.

The Kafka admin API does not say *when* a group committed, only what its committed offset is
now, so a collector polling it calls :meth:`PartitionWindow.observe`: an observation counts as a
commit when the committed offset moved, or when a live member owns the partition (a consumer
that is alive but not moving keeps committing the same offset: Burrow's STALL). An unmoved
offset with no owner is nobody committing, which ages the window into Burrow's STOP.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_INTERVALS = 10
DEFAULT_MIN_DISTANCE_S = 1.0


@dataclass(frozen=True, slots=True)
class Sample:
    """One commit as Burrow stores it: when, the committed offset, and the end offset then."""

    timestamp: float  # seconds since the epoch
    committed_offset: int
    end_offset: int

    @property
    def lag(self) -> int:
        # A commit can be ahead of an end offset read a moment earlier: that is zero lag.
        return max(0, self.end_offset - self.committed_offset)


@dataclass(frozen=True, slots=True)
class PartitionWindow:
    """The last ``intervals`` commits (oldest first) and the last ``intervals`` end offsets."""

    samples: tuple[Sample, ...] = ()
    end_offsets: tuple[int, ...] = ()
    intervals: int = DEFAULT_INTERVALS
    min_distance: float = DEFAULT_MIN_DISTANCE_S

    def __post_init__(self) -> None:
        if self.intervals < 1:
            raise ValueError(f"intervals must be at least 1, got {self.intervals}")
        if self.min_distance < 0:
            raise ValueError(f"min_distance must not be negative, got {self.min_distance}")

    @property
    def complete(self) -> float:
        """The fraction of the window that holds commits (Burrow's ``Complete``)."""
        return len(self.samples) / self.intervals

    @property
    def current_lag(self) -> int:
        """Latest end offset minus latest committed offset, never negative; 0 with no commit."""
        if not self.samples:
            return 0
        end = self.end_offsets[-1] if self.end_offsets else self.samples[-1].end_offset
        return max(0, end - self.samples[-1].committed_offset)

    def add(self, sample: Sample) -> PartitionWindow:
        """The window after one more commit; a commit older than the newest one is ignored."""
        samples = self._samples_with(sample)
        if samples is self.samples:
            return self
        return PartitionWindow(samples, self.end_offsets, self.intervals, self.min_distance)

    def _samples_with(self, sample: Sample) -> tuple[Sample, ...]:
        # Windows are made with the constructor, not dataclasses.replace: the collector makes
        # one per group partition a cycle, and replace's field walk was a fifth of its
        # analysis at 10,000 (bench/collector_db_bench.py --analyze-only).
        if not self.samples:
            return (sample,)
        last = self.samples[-1]
        if sample.timestamp < last.timestamp:
            return self.samples
        if sample.timestamp - last.timestamp < self.min_distance:
            merged = Sample(last.timestamp, sample.committed_offset, sample.end_offset)
            return (*self.samples[:-1], merged)
        return (*self.samples, sample)[-self.intervals :]

    def note_end_offset(self, end_offset: int) -> PartitionWindow:
        """The window after one more broker end offset reading."""
        ends = (*self.end_offsets, end_offset)[-self.intervals :]
        return PartitionWindow(self.samples, ends, self.intervals, self.min_distance)

    def observe(
        self, timestamp: float, committed_offset: int, end_offset: int, *, owned: bool
    ) -> PartitionWindow:
        """One poll of the group's committed offset and the partition's end offset.

        ``owned`` says a live group member is assigned the partition.
        """
        ends = (*self.end_offsets, end_offset)[-self.intervals :]
        moved = not self.samples or self.samples[-1].committed_offset != committed_offset
        samples = (self._samples_with(Sample(timestamp, committed_offset, end_offset))
                   if moved or owned else self.samples)
        if samples is self.samples and ends == self.end_offsets:
            # Nothing moved and the end ring is full of this end offset already (a caught-up
            # or stopped consumer): the same window. Most of a large cluster's group
            # partitions are so on most cycles, and a value is cheaper kept than rebuilt.
            return self
        return PartitionWindow(samples, ends, self.intervals, self.min_distance)
