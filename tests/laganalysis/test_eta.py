"""Catch-up ETA from consume vs produce rates, and lag skew (max/mean, Gini), hand-computed."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from laganalysis.eta import Progress, group_eta, partition_eta, rates, skew
from laganalysis.window import Sample


def test_the_eta_is_lag_over_the_drain_rate() -> None:
    # Over 100 s: consumed 5000 (50/s), produced 3000 (30/s); lag 5000 drains at 20/s: 250 s.
    samples = [Sample(0.0, 0, 7000), Sample(100.0, 5000, 10000)]
    assert rates(samples) == (50.0, 30.0)
    eta = partition_eta(samples)
    assert (eta.consume_rate, eta.produce_rate, eta.lag) == (50.0, 30.0, 5000)
    assert eta.progress is Progress.CATCHING_UP and eta.seconds == 250.0


def test_a_consumer_slower_than_its_producers_never_catches_up() -> None:
    eta = partition_eta([Sample(0.0, 0, 100), Sample(10.0, 50, 200)])
    assert eta.progress is Progress.NEVER and eta.seconds is None


def test_a_stopped_consumer_never_catches_up_even_on_an_idle_topic() -> None:
    eta = partition_eta([Sample(0.0, 10, 100), Sample(10.0, 10, 100)])
    assert eta.progress is Progress.NEVER


def test_no_lag_is_caught_up_whatever_the_rates() -> None:
    eta = partition_eta([Sample(0.0, 0, 100), Sample(10.0, 100, 300)], lag=0)
    assert eta.progress is Progress.CAUGHT_UP and eta.seconds == 0.0


def test_one_sample_gives_no_rate() -> None:
    eta = partition_eta([Sample(0.0, 0, 100)])
    assert eta.progress is Progress.UNKNOWN and eta.lag == 100


def test_the_group_waits_for_its_slowest_partition() -> None:
    parts = {
        0: partition_eta([Sample(0.0, 0, 1000), Sample(10.0, 100, 1000)]),  # 900 at 10/s: 90 s
        1: partition_eta([Sample(0.0, 0, 100), Sample(10.0, 50, 100)]),  # 50 at 5/s: 10 s
        2: partition_eta([Sample(0.0, 0, 0), Sample(10.0, 0, 0)]),
    }
    group = group_eta(parts)
    assert group.progress is Progress.CATCHING_UP
    assert group.seconds == 90.0 and group.slowest_partition == 0
    assert group.total_lag == 950


def test_one_partition_that_never_catches_up_makes_the_group_never() -> None:
    parts = {
        0: partition_eta([Sample(0.0, 0, 1000), Sample(10.0, 100, 1000)]),
        1: partition_eta([Sample(0.0, 0, 100), Sample(10.0, 0, 200)]),
    }
    group = group_eta(parts)
    assert group.progress is Progress.NEVER and group.slowest_partition == 1


def test_skew_of_hand_computed_lags() -> None:
    # lags 0, 0, 0, 100: mean 25, max/mean 4; Gini = (n-1)/n = 0.75.
    s = skew([0, 0, 100, 0])
    assert s.max_over_mean == 4.0 and math.isclose(s.gini, 0.75)
    # lags 1, 2, 3: sum |xi-xj| over ordered pairs = 8; Gini = 8 / (2 * 9 * 2) = 2/9.
    s = skew([3, 1, 2])
    assert s.max_over_mean == 1.5 and math.isclose(s.gini, 2 / 9)


def test_even_or_empty_lag_has_no_skew() -> None:
    assert skew([5, 5, 5]).gini == 0.0 and skew([5, 5, 5]).max_over_mean == 1.0
    assert skew([]) == skew([0, 0])
    assert skew([]).max_over_mean == 1.0 and skew([]).gini == 0.0


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=50))
def test_gini_matches_the_mean_absolute_difference_definition(lags: list[int]) -> None:
    n, total = len(lags), sum(lags)
    expected = 0.0
    if total:
        expected = sum(abs(a - b) for a in lags for b in lags) / (2 * n * total)
    s = skew(lags)
    assert math.isclose(s.gini, expected, abs_tol=1e-9)
    assert 0.0 <= s.gini <= (n - 1) / n + 1e-9
    assert 1.0 <= s.max_over_mean <= n + 1e-9
