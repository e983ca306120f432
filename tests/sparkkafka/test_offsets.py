"""Admission control and the checkpoint's offset JSON, without Spark or a cluster."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparkkafka.offsets import admit, from_json, to_json

partitions = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3)),
    st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
    min_size=1,
)


@given(partitions, st.integers(1, 500))
def test_a_limit_admits_at_most_that_many_records_and_always_some(
    ranges: dict[tuple[str, int], tuple[int, int]], limit: int
) -> None:
    start = {tp: lo for tp, (lo, _) in ranges.items()}
    latest = {tp: lo + n for tp, (lo, n) in ranges.items()}
    end = admit(start, latest, limit)
    admitted = {tp: end[tp] - start[tp] for tp in latest}
    waiting = sum(latest[tp] - start[tp] for tp in latest)
    assert all(0 <= admitted[tp] <= latest[tp] - start[tp] for tp in latest)
    assert sum(admitted.values()) == min(limit, waiting)


def test_the_limit_is_shared_in_proportion_to_what_waits() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 5}
    assert admit(start, latest, 40) == {("t", 0): 30, ("t", 1): 110, ("t", 2): 5}
    assert admit(start, latest, None) == latest


def test_offsets_are_sparks_kafka_json() -> None:
    offsets = {("b", 1): 7, ("a", 0): 3, ("b", 0): 2}
    assert to_json(offsets) == {"a": {"0": 3}, "b": {"0": 2, "1": 7}}
    assert from_json(to_json(offsets)) == offsets
