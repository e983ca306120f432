"""Crafted lag histories for the job tests, written as the collector writes the samples topic."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from laganalysis.burrow import Status
from laganalysis.records import ClusterEvent, LagSample, encode_cluster_event, encode_lag_sample

T0 = 1_699_999_200  # a whole hour, a Tuesday (UTC)


def sample(
    group: str, partition: int, ts: float, committed: int, end: int, status: Status = Status.OK
) -> LagSample:
    lag = max(0, end - committed)
    return LagSample(group, "t", partition, int(ts * 1000), committed, end, lag, lag / 10, status)


def write_samples(path: Path, samples: Iterable[LagSample]) -> str:
    with path.open("wb") as out:
        for s in samples:
            out.write(encode_lag_sample(s)[1] + b"\n")
    return str(path)


def write_events(path: Path, events: Iterable[ClusterEvent]) -> str:
    with path.open("wb") as out:
        for e in events:
            out.write(encode_cluster_event(e)[1] + b"\n")
    return str(path)


def catching_up_group() -> list[LagSample]:
    """g1, every 10 s for 10 min. p0 consumes 15/s against 10/s produced from a lag of 3000;
    p1 consumes 8/s against 10/s from 500 (never catches up); p2 stays at zero lag. p1 is WARN
    for its first 30 samples and OK after."""
    rows = []
    for i in range(60):
        t = 10 * i
        ts = T0 + t
        rows.append(sample("g1", 0, ts, 1000 + 15 * t, 4000 + 10 * t))
        status = Status.WARN if i < 30 else Status.OK
        rows.append(sample("g1", 1, ts, 8 * t, 500 + 10 * t, status))
        rows.append(sample("g1", 2, ts, 7 * t, 7 * t))
    return rows


def draining_group() -> list[LagSample]:
    """g2 over 100 s: p0 consumes 12/s against 10/s (lag 1200 - 2t); p1 consumes 6/s against
    5/s (lag 300 - t)."""
    rows = []
    for i in range(11):
        t = 10 * i
        rows.append(sample("g2", 0, T0 + t, 12 * t, 1200 + 10 * t))
        rows.append(sample("g2", 1, T0 + t, 6 * t, 300 + 5 * t))
    return rows


def seasonal_group(spike_day: int, spike_hour: int) -> list[LagSample]:
    """g3, one sample an hour for three weeks: lag 100 or 101 by week, and one spike of 10000."""
    rows = []
    for day in range(21):
        for hour in range(24):
            ts = T0 + day * 86400 + hour * 3600
            lag = 10_000 if (day, hour) == (spike_day, spike_hour) else 100 + (day // 7) % 2
            rows.append(sample("g3", 0, ts, 0, lag))
    return rows


def jumping_group() -> list[LagSample]:
    """g4 p0, every 10 s for 10 min: lag 100, +900 at t=300 and +500 at t=400."""
    rows = []
    for i in range(60):
        t = 10 * i
        lag = 100 + (900 if t >= 300 else 0) + (500 if t >= 400 else 0)
        rows.append(sample("g4", 0, T0 + t, 0, lag))
    return rows
