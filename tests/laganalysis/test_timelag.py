"""Lag in seconds from the end-offset/time lookup table (kafka-lag-exporter's method, §3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laganalysis.timelag import AddResult, Estimate, LookupTable, Outcome, Point


def table(*points: tuple[int, float], capacity: int = 60) -> LookupTable:
    t = LookupTable(capacity=capacity)
    for offset, time in points:
        t, _ = t.add(Point(offset, time))
    return t


def test_it_interpolates_between_the_adjacent_points() -> None:
    t = table((0, 100.0), (1000, 110.0), (1500, 120.0))
    # 1250 is halfway from 1000 (t=110) to 1500 (t=120): produced at 115.
    assert t.lag_seconds(1250, now=130.0) == Estimate(Outcome.PREDICTED, 15.0)
    assert t.lag_seconds(500, now=130.0) == Estimate(Outcome.PREDICTED, 25.0)


def test_it_extrapolates_with_the_first_and_last_points_before_the_table() -> None:
    t = table((1000, 100.0), (1200, 110.0), (2000, 120.0))
    # Line through (1000, 100) and (2000, 120): 50 offsets a second; 500 is 10 s before 100.
    assert t.lag_seconds(500, now=125.0) == Estimate(Outcome.PREDICTED, 35.0)


def test_a_commit_at_the_newest_end_offset_is_lag_zero() -> None:
    t = table((0, 0.0), (100, 10.0))
    assert t.lag_seconds(100, now=50.0) == Estimate(Outcome.LAG_IS_ZERO, 0.0)
    assert t.lag_seconds(150, now=50.0).outcome is Outcome.LAG_IS_ZERO


def test_a_single_point_is_too_few() -> None:
    assert table((100, 0.0)).lag_seconds(50, now=10.0) == Estimate(Outcome.TOO_FEW_POINTS, None)
    assert LookupTable().lag_seconds(50, now=10.0).outcome is Outcome.TOO_FEW_POINTS


def test_lag_zero_is_decided_before_too_few_points() -> None:
    assert table((100, 0.0)).lag_seconds(100, now=10.0).outcome is Outcome.LAG_IS_ZERO


def test_a_table_of_one_flat_stretch_has_no_rate_to_extrapolate_with() -> None:
    t = table((100, 0.0), (100, 10.0))
    assert t.lag_seconds(50, now=20.0).outcome is Outcome.TOO_FEW_POINTS


def test_a_commit_inside_a_flat_stretch_was_produced_when_the_stretch_ended() -> None:
    t = table((0, 0.0), (100, 10.0), (100, 20.0), (100, 30.0), (200, 40.0))
    assert t.points == (Point(0, 0.0), Point(100, 10.0), Point(100, 30.0), Point(200, 40.0))
    assert t.lag_seconds(100, now=50.0) == Estimate(Outcome.PREDICTED, 20.0)


def test_it_rejects_out_of_order_and_non_monotonic_points() -> None:
    t = table((100, 10.0))
    assert t.add(Point(200, 5.0)) == (t, AddResult.OUT_OF_ORDER)
    assert t.add(Point(50, 20.0)) == (t, AddResult.NON_MONOTONIC)


def test_flat_stretches_are_compressed() -> None:
    t = table((100, 0.0), (100, 10.0))
    t2, result = t.add(Point(100, 20.0))
    assert result is AddResult.FLAT_REPLACED
    assert t2.points == (Point(100, 0.0), Point(100, 20.0))
    t3, result = t2.add(Point(150, 30.0))
    assert result is AddResult.APPENDED and len(t3.points) == 3


def test_the_table_is_bounded() -> None:
    t = table(*[(i * 10, float(i)) for i in range(100)], capacity=60)
    assert len(t.points) == 60 and t.points[0] == Point(400, 40.0)


def test_a_lag_estimated_in_the_future_is_zero_seconds() -> None:
    t = table((0, 0.0), (100, 100.0))
    assert t.lag_seconds(50, now=10.0) == Estimate(Outcome.PREDICTED, 0.0)


def test_a_table_needs_room_for_two_points() -> None:
    with pytest.raises(ValueError):
        LookupTable(capacity=1)


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 100)), min_size=2, max_size=30),
    st.integers(0, 30_000),
    st.integers(0, 30_000),
)
def test_a_later_commit_is_never_more_seconds_behind(
    steps: list[tuple[int, int]], a: int, b: int
) -> None:
    t, offset, time = LookupTable(), 0, 0.0
    for grow, dt in steps:
        offset, time = offset + grow, time + dt
        t, _ = t.add(Point(offset, time))
    now = time + 5
    lo, hi = sorted((a, b))
    x, y = t.lag_seconds(lo, now), t.lag_seconds(hi, now)
    if x.seconds is not None and y.seconds is not None:
        assert y.seconds <= x.seconds + 1e-6
    assert all(e.seconds is None or e.seconds >= 0 for e in (x, y))
