"""The lag-anomaly rule (laganalysis/lagbaseline.py) as pure code: cycles summed over
partitions, judged against the rolling mean + k·stddev, alerts on the edges only."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from laganalysis.lagbaseline import (
    CLEARED,
    RAISED,
    Baseline,
    Rule,
    RuleError,
    feed,
    judge,
)

RULE = Rule(k=3.0, window=5, min_history=3)


def cycles(*lags: int, partitions: int = 2, start: int = 1_000) -> list[tuple[int, int]]:
    """One sample per partition per cycle, the cycle's lag split over its partitions."""
    out = []
    for i, lag in enumerate(lags):
        share = [lag // partitions] * partitions
        share[0] += lag - sum(share)
        out += [(start + i * 1000, s) for s in share]
    return out


def test_a_cycle_is_summed_over_partitions_and_judged_when_the_next_one_starts() -> None:
    fed = feed(Baseline(), cycles(10, 12), RULE)
    assert [j.lag for j in fed.judgements] == [10]  # 12's cycle is still pending
    assert fed.baseline.pending_ts == 2_000 and fed.baseline.pending_lag == 12
    assert fed.baseline.history == (10,)


def test_a_jump_above_mean_plus_k_stddev_raises_one_alert_and_a_return_clears_it() -> None:
    steady = [100, 104, 96, 100, 102]
    fed = feed(Baseline(), cycles(*steady, 400, 401, 100, 100), RULE)
    assert [a.state for a in fed.alerts] == [RAISED, CLEARED]
    raised = fed.alerts[0].judgement
    history = steady[-RULE.window:]
    mean, stddev = statistics.fmean(history), statistics.pstdev(history)
    assert raised.lag == 400 and raised.ts == 1_000 + 5 * 1000
    assert raised.mean == pytest.approx(mean) and raised.stddev == pytest.approx(stddev)
    assert raised.threshold == pytest.approx(mean + 3 * max(stddev, mean / 10, 1))
    # 401 is anomalous too, but the pair is already alerting: no second alert.
    assert [j.anomalous for j in fed.judgements] == [False] * 5 + [True, True, False]


def test_nothing_is_judged_before_min_history_cycles() -> None:
    fed = feed(Baseline(), cycles(1, 1, 500, 1), RULE)
    assert fed.alerts == []
    assert [j.mean is None for j in fed.judgements] == [True, True, True]


def test_a_flat_baseline_tolerates_a_tenth_of_its_level() -> None:
    # stddev 0: the deviation counts as mean/10 = 100, so 1,300 is the threshold.
    history = (1000, 1000, 1000)
    assert not judge(history, 0, 1300, RULE).anomalous
    assert judge(history, 0, 1301, RULE).anomalous
    # ... and at least one record when the lag is zero.
    assert judge((0, 0, 0), 0, 3, RULE).threshold == 3.0
    assert judge((0, 0, 0), 0, 4, RULE).anomalous


def test_a_group_that_stays_behind_stays_alerted_and_the_window_rolls_on_normal_cycles(
) -> None:
    fed = feed(Baseline(), cycles(10, 10, 10, 10, 10, *[500] * 20, 12), RULE)
    assert [a.state for a in fed.alerts] == [RAISED]  # 12's cycle is pending
    assert fed.baseline.history == (10,) * RULE.window  # the 500s stayed out
    fed = feed(fed.baseline, cycles(11, 13, 9, start=100_000), RULE)
    assert [a.state for a in fed.alerts] == [CLEARED]
    assert fed.baseline.history == (10, 10, 12, 11, 13)


def test_samples_arrive_in_any_order_within_a_batch_and_late_ones_are_dropped() -> None:
    samples = cycles(10, 10, 10, 10, 900)
    whole = feed(Baseline(), samples, RULE)
    shuffled = feed(Baseline(), list(reversed(samples)), RULE)
    assert whole == shuffled
    # Batch by batch, through the state row Spark keeps, gives the same as all at once.
    state = Baseline()
    for i in range(0, len(samples), 3):
        state = Baseline.from_state(feed(state, samples[i:i + 3], RULE).baseline.to_state())
    assert state == whole.baseline
    late = feed(whole.baseline, [(1_000, 5)], RULE)
    assert late.baseline.late == 1 and late.baseline.history == whole.baseline.history


def test_the_rule_refuses_parameters_out_of_range_by_name() -> None:
    assert Rule.parse({}) == Rule()
    assert Rule.parse({"k": "2.5", "window": 30, "min_history": 5}) == Rule(2.5, 30, 5)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"k": 0}, "k"), ({"k": math.inf}, "k"), ({"window": 1}, "window"),
        ({"min_history": 0}, "min_history"), ({"k": "x"}, "numbers"),
        ({"window": 5, "min_history": 6}, "min_history"), ({"z": 3}, "unknown")]
    for params, word in cases:
        with pytest.raises(RuleError, match=word):
            Rule.parse(params)
