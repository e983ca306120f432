"""Burrow's partition and group status, one test per rule of reference §3, on crafted windows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from laganalysis.burrow import (
    PartitionStatus,
    Status,
    Thresholds,
    group_status,
    partition_status,
)
from laganalysis.window import PartitionWindow, Sample


def window(
    commits: list[tuple[int, int]], *, end_offsets: list[int] | None = None, step: float = 10.0
) -> PartitionWindow:
    """Commits (committed offset, end offset) every ``step`` seconds from t=0.

    The broker end-offset ring holds only the newest commit's end offset unless given.
    """
    w = PartitionWindow()
    for i, (committed, end) in enumerate(commits):
        w = w.add(Sample(i * step, committed, end))
    ends = end_offsets if end_offsets is not None else [commits[-1][1]]
    for end in ends:
        w = w.note_end_offset(end)
    return w


def status(w: PartitionWindow, now: float, **thresholds: float) -> Status:
    return partition_status(w, now, Thresholds(**thresholds)).status  # type: ignore[arg-type]


# Ten commits 0..90 s: "now" 95 is inside the span, so not stopped.
SLOW = [(100 * i, 100 * i + 50 + 10 * i) for i in range(10)]  # lag 50, 60, ..., 140


def test_rule_1_current_lag_within_allowed_lag_is_ok_whatever_the_history() -> None:
    stopped_long_ago = window([(100, 150), (100, 160)], end_offsets=[100])
    assert status(stopped_long_ago, now=10_000) is Status.OK
    assert status(window(SLOW), now=95) is Status.WARN
    assert status(window(SLOW), now=95, allowed_lag=140) is Status.OK


def test_rule_2_no_commit_for_longer_than_the_window_spans_is_stop() -> None:
    # Last commit at 90, first at 0: stopped once now - 90 > 90.
    assert status(window(SLOW), now=180) is Status.WARN
    assert status(window(SLOW), now=181) is Status.STOP


def test_rule_2_a_recent_end_offset_at_the_last_commit_delays_stop() -> None:
    caught_up_recently = window(SLOW, end_offsets=[900, 1040])  # 900 = last committed
    assert status(caught_up_recently, now=181) is Status.WARN


def test_rule_2_stop_is_checked_before_the_lag_was_ever_zero() -> None:
    zero_then_silent = window([(100, 100), (100, 150)], end_offsets=[150, 200])
    assert status(zero_then_silent, now=25) is Status.STOP


def test_rule_3_an_unrecovered_rewind_is_rewind() -> None:
    rewound = window([(100, 300), (200, 300), (300, 400), (150, 400), (250, 400)])
    assert status(rewound, now=45) is Status.REWIND


def test_rule_3_a_rewind_the_consumer_got_back_past_is_not_rewind() -> None:
    recovered = window([(100, 300), (200, 350), (300, 400), (150, 450), (320, 480)])
    assert status(recovered, now=45) is Status.OK  # lag 200, 150, 100, 300, 160 decreases


def test_rule_3_a_later_unrecovered_rewind_is_not_hidden_by_a_recovered_one() -> None:
    commits = [(100, 900), (50, 900), (120, 900), (60, 900), (70, 900)]
    assert status(window(commits), now=45) is Status.REWIND


def test_rule_3_rewind_is_checked_before_the_lag_was_ever_zero() -> None:
    rewound_after_zero = window([(300, 300), (100, 350), (150, 400)])
    assert status(rewound_after_zero, now=25) is Status.REWIND


def test_rule_4_lag_within_allowed_lag_at_any_commit_is_ok() -> None:
    was_zero = window([(100, 100), (100, 200), (100, 300)])
    assert status(was_zero, now=25) is Status.OK
    was_within = window([(100, 120), (100, 200), (100, 300)])
    assert status(was_within, now=25) is Status.STALL
    assert status(was_within, now=25, allowed_lag=20) is Status.OK


def test_rule_5_the_same_offset_committed_across_the_window_is_stall() -> None:
    stalled = window([(500, 600), (500, 650), (500, 700)])
    assert status(stalled, now=25) is Status.STALL


def test_rule_6_lag_that_never_decreases_is_warn() -> None:
    assert status(window(SLOW), now=95) is Status.WARN
    flat = window([(100, 200), (200, 300), (300, 400)])
    assert status(flat, now=25) is Status.WARN


def test_rule_7_otherwise_ok() -> None:
    draining = window([(100, 400), (250, 450), (400, 500)])
    assert status(draining, now=25) is Status.OK


def test_a_window_below_minimum_complete_stays_ok() -> None:
    stalled = window([(500, 600), (500, 650), (500, 700)])
    assert status(stalled, now=25, minimum_complete=0.5) is Status.OK
    assert status(stalled, now=25, minimum_complete=0.3) is Status.STALL


def test_an_empty_window_is_ok_and_incomplete() -> None:
    result = partition_status(PartitionWindow(), now=0)
    assert result == PartitionStatus(Status.OK, 0.0, 0)


def test_the_group_is_its_worst_partition_with_stop_stall_rewind_as_err() -> None:
    parts = {
        ("t", 0): PartitionStatus(Status.OK, 1.0, 0),
        ("t", 1): PartitionStatus(Status.WARN, 1.0, 40),
        ("t", 2): PartitionStatus(Status.OK, 0.5, 10),
    }
    result = group_status(parts)
    assert result.status is Status.WARN
    assert result.total_lag == 50 and result.max_lag_partition == ("t", 1)
    assert result.complete == 2 / 3
    for bad in (Status.STOP, Status.STALL, Status.REWIND):
        assert group_status({**parts, ("t", 3): PartitionStatus(bad, 1.0, 5)}).status is Status.ERR


def test_a_group_with_no_partitions_is_notfound() -> None:
    assert group_status({}).status is Status.NOTFOUND


def test_the_codes_are_burrows() -> None:
    assert [s.value for s in Status] == [0, 1, 2, 3, 4, 5, 6]
    assert [s.name for s in Status] == ["NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND"]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=12),
    st.floats(0, 1000),
)
def test_a_partition_at_zero_lag_is_always_ok(commits: list[tuple[int, int]], now: float) -> None:
    w = window(commits).note_end_offset(commits[-1][0])
    assert status(w, now=now) is Status.OK


@given(st.lists(st.sampled_from(list(Status)[1:]), min_size=1, max_size=20))
def test_the_group_status_is_never_above_err(statuses: list[Status]) -> None:
    parts = {i: PartitionStatus(s, 1.0, i) for i, s in enumerate(statuses)}
    assert Status.OK <= group_status(parts).status <= Status.ERR
