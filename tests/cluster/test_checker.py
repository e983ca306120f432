"""The history checker on small handcrafted histories: each anomaly is found, and only it."""

from __future__ import annotations

import pytest

from tests.cluster.checker import History, Report, check

Final = dict[int, list[tuple[int, str | None, str]]]


def history_of(writes: list[tuple[str, str, int, int]], final: Final) -> History:
    """Acked writes (process, value, partition, offset), invoked in list order."""
    history = History()
    for process, value, _, _ in writes:
        history.invoke(process, value)
    for _, value, partition, offset in writes:
        history.ok(value, partition, offset)
    history.final_read(final)
    return history


def clean() -> History:
    history = history_of(
        [("p1", "a", 0, 0), ("p2", "x", 0, 1), ("p1", "b", 0, 2), ("p1", "c", 1, 0)],
        {0: [(0, None, "a"), (1, None, "x"), (2, None, "b")], 1: [(0, None, "c")]},
    )
    history.invoke("p2", "y")
    history.info("y", "timed out")  # unknown, and indeed absent: fine
    history.invoke("p2", "z")
    history.fail("z", "queue full")
    history.read("group", 0, 0, None, "a")
    history.read("group", 0, 0, None, "a")  # re-read after a rebalance: same value, fine
    history.read("group", 1, 0, None, "c")
    return history


def only(report: Report) -> list[str]:
    return list(report.found())


def test_a_clean_history_passes() -> None:
    report = check(clean())
    assert report.valid, str(report)
    assert str(report) == "no anomalies"


def test_an_unknown_write_that_landed_is_fine() -> None:
    history = clean()
    assert history.final is not None
    history.final[1].append((1, None, "y"))
    assert check(history).valid


def test_it_finds_an_acked_write_missing_from_the_final_read() -> None:
    history = clean()
    assert history.final is not None
    history.final[0] = [(0, None, "a"), (1, None, "x")]  # "b" at 0@2 vanished
    report = check(history)
    assert only(report) == ["lost"]
    assert "'b' acked at 0@2" in report.lost[0]


def test_it_finds_a_truncated_partition_as_lost_writes() -> None:
    history = clean()
    assert history.final is not None
    history.final[1] = []
    assert only(check(history)) == ["lost"]


def test_it_finds_a_value_written_twice() -> None:
    history = clean()
    assert history.final is not None
    history.final[0].append((3, None, "a"))
    report = check(history)
    assert only(report) == ["duplicated"]
    assert "0@0, 0@3" in report.duplicated[0]


def test_it_finds_a_duplicate_that_only_a_consumer_saw() -> None:
    history = clean()
    history.read("group", 1, 7, None, "x")
    assert "duplicated" in only(check(history))


def test_it_finds_one_producers_writes_acked_out_of_order() -> None:
    history = history_of(
        [("p1", "a", 0, 1), ("p1", "b", 0, 0)],
        {0: [(0, None, "b"), (1, None, "a")]},
    )
    report = check(history)
    assert only(report) == ["reordered"]
    assert "sent 'a' before 'b'" in report.reordered[0]


def test_interleaving_of_two_producers_is_not_reordering() -> None:
    history = history_of(
        [("p1", "a", 0, 1), ("p2", "b", 0, 0), ("p1", "c", 1, 0), ("p1", "d", 0, 2)],
        {0: [(0, None, "b"), (1, None, "a"), (2, None, "d")], 1: [(0, None, "c")]},
    )
    assert check(history).valid


def test_it_finds_a_position_read_with_two_values() -> None:
    history = clean()
    history.invoke("p3", "q")
    history.info("q")
    history.read("group", 1, 0, None, "q")  # the final read has "c" there
    report = check(history)
    assert only(report) == ["changed_meaning"]
    assert "1@0" in report.changed_meaning[0]


def test_it_finds_an_ack_whose_offset_holds_another_value() -> None:
    history = clean()
    assert history.final is not None
    # "b" was acked at 0@2 but the log moved it to 0@3 and put "y" at 0@2.
    history.final[0] = [(0, None, "a"), (1, None, "x"), (2, None, "y"), (3, None, "b")]
    report = check(history)
    assert only(report) == ["changed_meaning"]
    assert "'b' acked at 0@2, which holds ['y']" in report.changed_meaning[0]


def test_it_finds_a_value_nobody_wrote() -> None:
    history = clean()
    assert history.final is not None
    history.final[1].append((1, None, "ghost"))
    report = check(history)
    assert only(report) == ["unexpected"]


def test_it_finds_a_definitely_failed_write_that_was_written() -> None:
    history = clean()
    assert history.final is not None
    history.final[1].append((1, None, "z"))
    assert only(check(history)) == ["failed_but_present"]


def test_a_drained_group_must_have_read_every_acked_write() -> None:
    history = clean()
    history.consumers_drained = True
    report = check(history)
    assert only(report) == ["unconsumed"]
    assert "'x'" in report.unconsumed[0] and "'b'" in report.unconsumed[1]
    history.read("group", 0, 1, None, "x")
    history.read("group", 0, 2, None, "b")
    assert check(history).valid


def test_a_history_without_a_final_read_cannot_be_checked() -> None:
    history = History()
    history.invoke("p1", "a")
    history.ok("a", 0, 0)
    with pytest.raises(ValueError, match="no final read"):
        check(history)


def test_the_history_refuses_reused_values_and_double_completions() -> None:
    history = History()
    history.invoke("p1", "a")
    with pytest.raises(ValueError, match="attempted twice"):
        history.invoke("p2", "a")
    history.ok("a", 0, 0)
    with pytest.raises(ValueError, match="completed twice"):
        history.info("a")


def test_an_ack_without_an_offset_must_still_be_in_the_log() -> None:
    history = History()
    for value in ("a", "b", "c"):
        history.invoke("p1", value)
    history.ok("a", 0, 0)
    history.ok("b", 0, None)
    history.ok("c", 0, None)
    history.final_read({0: [(0, None, "a"), (1, None, "b")]})
    report = check(history)
    assert report.lost == ["'c' acked at ?"]
    assert not report.reordered and not report.changed_meaning


# -- transactions ----------------------------------------------------------------------------
def transactional() -> History:
    """Transaction t1 (committed: s0, s1) and t2 (aborted: s2); a transform of s0 committed
    with the group's offset 1 of partition 0, and an aborted first try of it (o1-s0)."""
    history = History()
    for value in ("s0", "s1", "s2"):
        history.invoke("txn", value)
    history.transaction(["s0", "s1"])
    history.transaction(["s2"])
    history.ok("s0", 0, 0)
    history.ok("s1", 1, 0)
    history.fail("s2", "aborted")
    for output, status in (("o1-s0", "fail"), ("o2-s0", "ok")):
        history.invoke("ctp", output)
        history.transaction([output])
        history.derive(output, "s0")
        if status == "ok":
            history.ok(output, 0, 3)
        else:
            history.fail(output, "aborted")
    history.committed_offsets = {0: 1, 1: 0}
    # s2 at 0@1 and o1-s0 at 0@2 are aborted: read_committed skips them.
    history.final_read({0: [(0, None, "s0"), (3, None, "o2-s0")], 1: [(0, None, "s1")]})
    return history


def test_a_clean_transactional_history_passes() -> None:
    report = check(transactional())
    assert report.valid, str(report)


def test_it_finds_a_transaction_half_visible() -> None:
    history = transactional()
    assert history.final is not None
    history.final[1] = []  # s1 gone, s0 of the same transaction still there
    assert only(check(history)) == ["lost", "partial"]


def test_it_finds_an_aborted_record_read_committed() -> None:
    history = transactional()
    history.read("reader", 0, 1, None, "s2")
    assert only(check(history)) == ["failed_but_present"]


def test_it_finds_a_source_transformed_twice() -> None:
    history = transactional()
    assert history.final is not None
    history.final[0].insert(1, (2, None, "o1-s0"))  # the aborted transform visible too
    assert only(check(history)) == ["failed_but_present", "offsets"]


def test_it_finds_an_output_committed_without_its_offset() -> None:
    history = transactional()
    history.committed_offsets = {0: 0, 1: 0}  # s0's output is there, its offset is not
    assert only(check(history)) == ["offsets"]


def test_it_finds_an_offset_committed_without_its_output() -> None:
    history = transactional()
    history.committed_offsets = {0: 1, 1: 1}  # s1 counted as consumed, never transformed
    assert only(check(history)) == ["offsets"]
