"""Burrow's consumer status: per partition from its sample window, per group the worst of them.

The partition rules run in this order (Burrow's ``calculatePartitionStatus``); the first that
applies decides:

1. current lag <= allowed lag: OK;
2. STOP when the time since the last commit is longer than the window's span
   (``now - last > last - first``), unless an end offset in the window shows the consumer was
   caught up recently (``checkIfRecentLagZero``);
3. REWIND when a committed offset went backwards and the consumer has not since reached the
   offset it had before (``checkIfRewindRecovered``);
4. OK when the lag was within the allowed lag at any commit in the window;
5. STALL when every commit in the window has the same offset;
6. WARN when the lag never decreases across the window (the consumer is slow);
7. otherwise OK.

A partition whose window is filled less than ``minimum_complete`` stays OK. The group status is
the worst partition status, with STOP, STALL and REWIND reported as ERR.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import pairwise
from typing import Generic, TypeVar

from laganalysis.window import PartitionWindow, Sample

K = TypeVar("K")


class Status(IntEnum):
    """Burrow's status codes (``core/protocol/evaluator.go``); a larger code is worse."""

    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Burrow's evaluator settings: ``allowed-lag`` and ``minimum-complete``."""

    allowed_lag: int = 0
    minimum_complete: float = 0.0


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    status: Status
    complete: float
    current_lag: int


@dataclass(frozen=True, slots=True)
class GroupStatus(Generic[K]):
    status: Status
    complete: float
    total_lag: int
    max_lag_partition: K | None
    partitions: Mapping[K, PartitionStatus]


def partition_status(
    window: PartitionWindow, now: float, thresholds: Thresholds = Thresholds()
) -> PartitionStatus:
    """Evaluate one partition's window at time ``now`` (seconds since the epoch)."""
    lag = window.current_lag
    if not window.samples or window.complete < thresholds.minimum_complete:
        return PartitionStatus(Status.OK, window.complete, lag)
    status = _status_of(window.samples, window.end_offsets, lag, now, thresholds.allowed_lag)
    return PartitionStatus(status, window.complete, lag)


def group_status(partitions: Mapping[K, PartitionStatus]) -> GroupStatus[K]:
    """The group's status from its partitions' statuses; NOTFOUND when it has none."""
    if not partitions:
        return GroupStatus(Status.NOTFOUND, 0.0, 0, None, {})
    worst, complete = group_verdict(partitions.values())
    max_key = max(partitions, key=lambda k: partitions[k].current_lag)
    total = sum(p.current_lag for p in partitions.values())
    return GroupStatus(worst, complete, total, max_key, dict(partitions))


def group_verdict(partitions: Collection[PartitionStatus]) -> tuple[Status, float]:
    """The group's status and completeness from its partitions' statuses: `group_status`
    without the keys, for a caller that needs no more (the collector, for every group each
    cycle); NOTFOUND with none."""
    if not partitions:
        return Status.NOTFOUND, 0.0
    worst = max(p.status for p in partitions)
    if worst > Status.ERR:
        worst = Status.ERR
    return worst, sum(1 for p in partitions if p.complete >= 1.0) / len(partitions)


def _status_of(
    samples: Sequence[Sample],
    end_offsets: Sequence[int],
    current_lag: int,
    now: float,
    allowed_lag: int,
) -> Status:
    if current_lag <= allowed_lag:
        return Status.OK
    if is_stopped(samples, now) and not is_recent_lag_zero(samples, end_offsets):
        return Status.STOP
    if has_unrecovered_rewind(samples):
        return Status.REWIND
    if any(s.lag <= allowed_lag for s in samples):
        return Status.OK
    if is_stalled(samples):
        return Status.STALL
    if is_lag_not_decreasing(samples):
        return Status.WARN
    return Status.OK


def is_stopped(samples: Sequence[Sample], now: float) -> bool:
    """No commit for longer than the window spans."""
    first, last = samples[0].timestamp, samples[-1].timestamp
    return now - last > last - first


def is_recent_lag_zero(samples: Sequence[Sample], end_offsets: Sequence[int]) -> bool:
    """Some recent end offset was at or below the last commit: the consumer was caught up."""
    # min() over the ring, not any() over a generator: the collector asks this of every
    # stopped partition every cycle (a quarter of 10,000 in bench/collector_db_bench.py)
    return bool(end_offsets) and min(end_offsets) <= samples[-1].committed_offset


def has_unrecovered_rewind(samples: Sequence[Sample]) -> bool:
    """A commit went below the one before it and no later commit got back to that offset.

    Every rewind in the window is checked, so a second, unrecovered rewind is not hidden by an
    earlier one the consumer recovered from.
    """
    for i in range(1, len(samples)):
        before = samples[i - 1].committed_offset
        if samples[i].committed_offset < before and not _recovered(samples[i:], before):
            return True
    return False


def _recovered(after_rewind: Sequence[Sample], offset_before: int) -> bool:
    return any(s.committed_offset >= offset_before for s in after_rewind)


def is_stalled(samples: Sequence[Sample]) -> bool:
    """Every commit in the window is the same offset."""
    return all(s.committed_offset == samples[0].committed_offset for s in samples)


def is_lag_not_decreasing(samples: Sequence[Sample]) -> bool:
    """The lag never goes down from one commit to the next."""
    return all(b.lag >= a.lag for a, b in pairwise(samples))
