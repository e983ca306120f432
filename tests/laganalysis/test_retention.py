"""The downsampling policy for lag history: full resolution for an hour, per minute for a week."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laganalysis.burrow import Status
from laganalysis.records import LagSample
from laganalysis.retention import DEFAULT_POLICY, Merge, Policy, Tier, downsample, plan

NOW = 60 * 16_666_667.0  # a whole minute since the epoch


def sample(ts: float, lag: int, status: Status = Status.OK, partition: int = 0) -> LagSample:
    return LagSample("g", "t", partition, int(ts * 1000), 1000 - lag, 1000, lag, lag / 10, status)


def test_the_last_hour_keeps_every_point() -> None:
    rows = [(i, NOW - 3599 + i * 5) for i in range(10)]
    assert plan(rows, NOW) == plan([], NOW)


def test_older_points_merge_per_minute_and_points_past_a_week_are_dropped() -> None:
    rows = [
        ("a", NOW - 7200.0),
        ("b", NOW - 7170.0),
        ("c", NOW - 7141.0),  # same minute as a and b
        ("d", NOW - 7140.0),  # the next minute, alone
        ("e", NOW - 8 * 86400.0),
    ]
    result = plan(rows, NOW)
    assert result.drop == ["e"]
    assert result.merge == [Merge(NOW - 7200.0, ("a", "b", "c"))]


def test_planning_again_after_merging_changes_nothing() -> None:
    first = downsample([sample(NOW - 7200 + i, lag=i) for i in range(60)], NOW)
    assert len(first) == 1
    assert downsample(first, NOW) == first
    assert downsample(first, NOW + 3600) == first


def test_a_merged_sample_keeps_the_newest_offsets_and_the_worst_lag_and_status() -> None:
    merged = downsample(
        [
            sample(NOW - 7200, lag=50, status=Status.WARN),
            sample(NOW - 7190, lag=80, status=Status.STALL),
            sample(NOW - 7180, lag=20, status=Status.OK),
        ],
        NOW,
    )
    assert len(merged) == 1
    m = merged[0]
    assert (m.timestamp_ms, m.lag, m.lag_seconds, m.status) == (
        int((NOW - 7200) * 1000),
        80,
        8.0,
        Status.STALL,
    )
    assert (m.committed_offset, m.end_offset) == (980, 1000)


def test_partitions_are_thinned_separately() -> None:
    rows = [sample(NOW - 7200, 1, partition=0), sample(NOW - 7199, 2, partition=1)]
    assert len(downsample(rows, NOW)) == 2


def test_a_policy_is_configurable_from_text() -> None:
    assert Policy.parse("1h=raw,7d=1m") == DEFAULT_POLICY
    assert Policy.parse("30m=raw, 1d=10s, 4w=1h").tiers[2] == Tier(4 * 7 * 86400, 3600)


@pytest.mark.parametrize("text", ["", "1h", "1h=raw,30m=1m", "1x=raw", "0s=raw", "1h=-1m"])
def test_a_bad_policy_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(ValueError):
        Policy.parse(text)


@given(st.lists(st.floats(NOW - 9 * 86400, NOW), max_size=300))
def test_storage_stays_flat(ages: list[float]) -> None:
    kept = downsample([sample(ts, 1) for ts in ages], NOW)
    recent = sum(1 for ts in ages if NOW - ts < 3600)
    assert len(kept) <= recent + 7 * 24 * 60 + 1
    assert all(NOW - s.timestamp_ms / 1000 < 7 * 86400 + 60 for s in kept)
