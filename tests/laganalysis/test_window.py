"""The sample window: Burrow's ring of commits and of broker end offsets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laganalysis.window import PartitionWindow, Sample


def test_it_keeps_the_last_n_commits_oldest_first() -> None:
    window = PartitionWindow(intervals=3)
    for i in range(5):
        window = window.add(Sample(float(i * 10), i * 100, 1000))
    assert [s.committed_offset for s in window.samples] == [200, 300, 400]
    assert window.complete == 1.0


def test_a_commit_within_min_distance_overwrites_the_slot_but_keeps_its_time() -> None:
    window = PartitionWindow(min_distance=5.0).add(Sample(100.0, 10, 50))
    window = window.add(Sample(103.0, 20, 55))
    assert window.samples == (Sample(100.0, 20, 55),)
    window = window.add(Sample(105.0, 30, 60))  # 5 s after the kept timestamp: a new slot
    assert [s.timestamp for s in window.samples] == [100.0, 105.0]


def test_a_commit_older_than_the_newest_is_ignored() -> None:
    window = PartitionWindow().add(Sample(100.0, 10, 50))
    assert window.add(Sample(90.0, 5, 50)) is window


def test_complete_is_the_filled_fraction() -> None:
    window = PartitionWindow(intervals=4).add(Sample(0.0, 1, 2))
    assert window.complete == 0.25


def test_current_lag_uses_the_newest_end_offset_and_never_goes_negative() -> None:
    window = PartitionWindow().add(Sample(0.0, 100, 150)).note_end_offset(180)
    assert window.current_lag == 80
    assert PartitionWindow().add(Sample(0.0, 100, 90)).current_lag == 0
    assert PartitionWindow().current_lag == 0


def test_observe_records_an_unmoved_offset_only_while_a_member_owns_the_partition() -> None:
    window = PartitionWindow().observe(0.0, 100, 200, owned=True)
    unowned = window.observe(10.0, 100, 210, owned=False)
    assert len(unowned.samples) == 1 and unowned.end_offsets == (200, 210)
    owned = window.observe(10.0, 100, 210, owned=True)
    assert len(owned.samples) == 2
    moved = window.observe(10.0, 150, 210, owned=False)
    assert [s.committed_offset for s in moved.samples] == [100, 150]


def test_an_observation_that_changes_nothing_keeps_the_window_and_any_change_is_recorded(
) -> None:
    # The collector keeps a window that did not change (observe returns it): a stopped
    # consumer's window settles once its end ring is full of one end offset, and from then on
    # a new end offset, a moved commit or an owner must each still make a new window.
    window = PartitionWindow(intervals=3).observe(0.0, 100, 200, owned=False)
    for at in (5.0, 10.0):
        window = window.observe(at, 100, 200, owned=False)
    assert window.end_offsets == (200, 200, 200)
    assert window.observe(15.0, 100, 200, owned=False) is window
    assert window.observe(15.0, 100, 201, owned=False).end_offsets == (200, 200, 201)
    assert [s.committed_offset for s in window.observe(15.0, 150, 200, owned=False).samples
            ] == [100, 150]
    assert [s.timestamp for s in window.observe(15.0, 100, 200, owned=True).samples
            ] == [0.0, 15.0]
    filling = PartitionWindow(intervals=3).observe(0.0, 100, 200, owned=False)
    assert filling.observe(5.0, 100, 200, owned=False).end_offsets == (200, 200)


def test_it_refuses_an_empty_window() -> None:
    with pytest.raises(ValueError, match="intervals"):
        PartitionWindow(intervals=0)


@given(st.lists(st.tuples(st.floats(0, 1e6), st.integers(0, 10**9)), max_size=40))
def test_the_window_never_outgrows_its_intervals_and_stays_in_time_order(
    commits: list[tuple[float, int]],
) -> None:
    window = PartitionWindow(intervals=10, min_distance=1.0)
    for ts, offset in commits:
        window = window.add(Sample(ts, offset, offset + 5)).note_end_offset(offset + 5)
    assert len(window.samples) <= 10 and len(window.end_offsets) <= 10
    times = [s.timestamp for s in window.samples]
    assert times == sorted(times)
