"""Catch-up ETA from consume vs produce rates, and how unevenly lag spreads across partitions.

Over a partition's window the consumer advanced ``committed[-1] - committed[0]`` offsets and
the producers ``end[-1] - end[0]``, in ``t[-1] - t[0]`` seconds. The lag drains at
``consume_rate - produce_rate`` per second; the ETA is ``lag / drain``, and "never" when the
drain is not positive (the consumer is slower than the producers, or stopped). A group has
caught up when its slowest partition has, so the group ETA is the largest partition ETA: one
hot partition delays the whole group, which is the skew users ask the ETA to account for.

Skew is reported two ways over the partitions' lags: max/mean (1.0 when even; ``n`` when one
partition holds it all) and the Gini coefficient (0 when even; ``(n-1)/n`` when one holds all).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from laganalysis.window import Sample

K = TypeVar("K")


class Progress(Enum):
    CAUGHT_UP = "caught_up"  # no lag
    CATCHING_UP = "catching_up"  # the lag drains; ``seconds`` says when it is gone
    NEVER = "never"  # the consumer is slower than the producers, or stopped
    UNKNOWN = "unknown"  # fewer than two samples over a positive span of time


@dataclass(frozen=True, slots=True)
class Eta:
    progress: Progress
    seconds: float | None  # None unless CAUGHT_UP (0.0) or CATCHING_UP
    lag: int
    consume_rate: float | None  # offsets per second over the window
    produce_rate: float | None


@dataclass(frozen=True, slots=True)
class Skew:
    max_over_mean: float
    gini: float


@dataclass(frozen=True, slots=True)
class GroupEta(Generic[K]):
    progress: Progress
    seconds: float | None
    total_lag: int
    slowest_partition: K | None  # the partition whose ETA is the group's
    skew: Skew


def rates(samples: Sequence[Sample]) -> tuple[float, float] | None:
    """(consume, produce) rates in offsets per second over the samples, or None."""
    if len(samples) < 2:
        return None
    span = samples[-1].timestamp - samples[0].timestamp
    if span <= 0:
        return None
    consumed = samples[-1].committed_offset - samples[0].committed_offset
    produced = samples[-1].end_offset - samples[0].end_offset
    return consumed / span, produced / span


def partition_eta(samples: Sequence[Sample], lag: int | None = None) -> Eta:
    """The ETA for a partition from its window; ``lag`` defaults to the newest sample's."""
    if lag is None:
        lag = samples[-1].lag if samples else 0
    measured = rates(samples)
    consume, produce = measured if measured else (None, None)
    if lag == 0:
        return Eta(Progress.CAUGHT_UP, 0.0, lag, consume, produce)
    if consume is None or produce is None:
        return Eta(Progress.UNKNOWN, None, lag, consume, produce)
    drain = consume - produce
    if drain <= 0:
        return Eta(Progress.NEVER, None, lag, consume, produce)
    return Eta(Progress.CATCHING_UP, lag / drain, lag, consume, produce)


def group_eta(partitions: Mapping[K, Eta]) -> GroupEta[K]:
    """The group's ETA: its slowest partition's; NEVER if any partition never catches up."""
    lags = [eta.lag for eta in partitions.values()]
    spread = skew(lags)
    total = sum(lags)
    lagging = {k: eta for k, eta in partitions.items() if eta.progress is not Progress.CAUGHT_UP}
    if not lagging:
        return GroupEta(Progress.CAUGHT_UP, 0.0, total, None, spread)
    for progress in (Progress.NEVER, Progress.UNKNOWN):
        stuck = [k for k, eta in lagging.items() if eta.progress is progress]
        if stuck:
            worst = max(stuck, key=lambda k: lagging[k].lag)
            return GroupEta(progress, None, total, worst, spread)
    slowest = max(lagging, key=lambda k: lagging[k].seconds or 0.0)
    return GroupEta(Progress.CATCHING_UP, lagging[slowest].seconds, total, slowest, spread)


def skew(values: Iterable[float]) -> Skew:
    """max/mean and Gini of non-negative values; an empty or all-zero set is even (1.0, 0.0)."""
    ordered = sorted(values)
    n = len(ordered)
    total = sum(ordered)
    if n == 0 or total <= 0:
        return Skew(1.0, 0.0)
    mean = total / n
    return Skew(ordered[-1] / mean, gini_sorted(ordered, total))


def gini_sorted(ordered: Sequence[float], total: float) -> float:
    """Gini of ascending values: ``2*sum(i*x_i)/(n*sum(x)) - (n+1)/n`` with ``i`` from 1."""
    n = len(ordered)
    weighted = sum(i * x for i, x in enumerate(ordered, start=1))
    return max(0.0, 2.0 * weighted / (n * total) - (n + 1) / n)  # no float dust below 0
