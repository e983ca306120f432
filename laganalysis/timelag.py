"""Lag in seconds by kafka-lag-exporter's method: interpolate in an end-offset/time table.

For each partition the collector records, on every poll, a point (end offset, wall time). To
turn a committed offset ``c`` into seconds, find when the end offset passed ``c`` and subtract
that from now: with the adjacent points ``l.offset <= c <= r.offset``,
``t = r.time - (r.offset - c) * (r.time - l.time) / (r.offset - l.offset)`` and
``lag_seconds = now - t``. When ``c`` is older than the table, the line through the first and
last points is extrapolated. No message is fetched.

The table rejects points older than its newest one and points whose offset went backwards
(a truncated or recreated partition), compresses flat stretches (when the two newest points
already share the new point's offset, the newest is replaced instead of appended), and keeps
at most ``capacity`` points (kafka-lag-exporter's ``lookup-table.memory.size``, 60).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

DEFAULT_CAPACITY = 60


@dataclass(frozen=True, slots=True)
class Point:
    offset: int
    time: float  # seconds since the epoch


class AddResult(Enum):
    APPENDED = "appended"
    FLAT_REPLACED = "flat_replaced"  # the newest point of a flat stretch moved forward
    OUT_OF_ORDER = "out_of_order"  # older than the newest point: rejected
    NON_MONOTONIC = "non_monotonic"  # offset below the newest point's: rejected


class Outcome(Enum):
    LAG_IS_ZERO = "lag_is_zero"
    TOO_FEW_POINTS = "too_few_points"
    PREDICTED = "predicted"


@dataclass(frozen=True, slots=True)
class Estimate:
    outcome: Outcome
    seconds: float | None  # 0.0 for LAG_IS_ZERO, None for TOO_FEW_POINTS


@dataclass(frozen=True, slots=True)
class LookupTable:
    """One partition's (end offset, time) points, oldest first."""

    points: tuple[Point, ...] = ()
    capacity: int = DEFAULT_CAPACITY

    def __post_init__(self) -> None:
        if self.capacity < 2:
            raise ValueError(f"a lookup table needs room for 2 points, got {self.capacity}")

    def add(self, point: Point) -> tuple[LookupTable, AddResult]:
        """The table with ``point`` recorded, and what happened to it."""
        if not self.points:
            return LookupTable((point,), self.capacity), AddResult.APPENDED
        newest = self.points[-1]
        if point.time < newest.time:
            return self, AddResult.OUT_OF_ORDER
        if point.offset < newest.offset:
            return self, AddResult.NON_MONOTONIC
        if len(self.points) >= 2 and self.points[-2].offset == newest.offset == point.offset:
            return (LookupTable((*self.points[:-1], point), self.capacity),
                    AddResult.FLAT_REPLACED)
        # The constructor, not dataclasses.replace: one table per partition a cycle (window.py)
        return (LookupTable((*self.points, point)[-self.capacity :], self.capacity),
                AddResult.APPENDED)

    def lag_seconds(self, committed_offset: int, now: float) -> Estimate:
        """How long ago the end offset passed ``committed_offset``, as of ``now``."""
        if self.points and committed_offset >= self.points[-1].offset:
            # At the newest end offset (or past it, when the table is older than the commit).
            return Estimate(Outcome.LAG_IS_ZERO, 0.0)
        if len(self.points) < 2:
            return Estimate(Outcome.TOO_FEW_POINTS, None)
        left, right = self._pair_around(committed_offset)
        if right.offset == left.offset:
            # Every point has the same offset: there is no rate to estimate with.
            return Estimate(Outcome.TOO_FEW_POINTS, None)
        slope = (right.time - left.time) / (right.offset - left.offset)
        produced_at = right.time - (right.offset - committed_offset) * slope
        return Estimate(Outcome.PREDICTED, max(0.0, now - produced_at))

    def _pair_around(self, offset: int) -> tuple[Point, Point]:
        # The newest rising pair that brackets the offset; flat pairs bracket nothing useful.
        points = self.points
        for i in range(len(points) - 1, 0, -1):
            left, right = points[i - 1], points[i]
            if left.offset <= offset <= right.offset and left.offset < right.offset:
                return left, right
        return points[0], points[-1]
