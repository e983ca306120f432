from __future__ import annotations

import pytest

from brokercore.clock import FakeClock
from brokercore.log import OffsetOutOfRangeError
from tests.brokercore.log.builders import make_batch, offsets_in
from tests.brokercore.log.conftest import OpenLog


def fill(log, clock: FakeClock, batches: int, epoch: int = 0) -> None:  # type: ignore[no-untyped-def]
    for n in range(batches):
        log.append_as_leader(make_batch([b"x" * 100], timestamp=clock.time_ms() + n), epoch)


def test_time_retention_deletes_old_closed_segments(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_bytes=400, retention_ms=60_000)
    fill(log, clock, 6)
    clock.advance(120)
    fill(log, clock, 2)
    old_segments = len(log.segments) - 1
    assert log.enforce_retention() == old_segments
    assert log.log_start_offset == 6
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.read(6, 1 << 20).first_offset == 6


def test_time_retention_rolls_rather_than_deleting_the_active_segment(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(retention_ms=1000)
    fill(log, clock, 3)
    clock.advance(5)
    assert log.enforce_retention() == 1
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (3, 3, 0)
    assert log.enforce_retention() == 0
    assert log.append_as_leader(make_batch([b"y"]), 0).base_offset == 3


def test_size_retention_keeps_the_log_under_retention_bytes(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=400, retention_bytes=800)
    fill(log, clock, 12)
    log.enforce_retention()
    assert log.size_in_bytes <= 800 + log.active_segment.size
    assert log.log_start_offset == log.segments[0].base_offset > 0


def test_retention_ignores_time_and_size_on_compact_only_topics(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=400, retention_ms=1, cleanup_policy=frozenset({"compact"}))
    for n in range(6):
        log.append_as_leader(make_batch([b"x" * 100], keys=[b"k%d" % n]), 0)
    clock.advance(10)
    assert log.enforce_retention() == 0


def test_delete_records_moves_the_log_start_and_a_reopen_takes_the_checkpointed_one(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=400)
    fill(log, clock, 10)
    assert log.delete_records_before(5) == 5
    assert log.delete_records_before(2) == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(11)
    assert log.enforce_retention() >= 1
    first_base = log.segments[0].base_offset
    assert first_base < 5
    del log
    # The log dir's log-start-offset-checkpoint (the replica manager's) gives it back.
    log = open_log(segment_bytes=400, log_start_offset=5)
    assert log.log_start_offset == 5
    assert log.read(5, 1 << 20).first_offset == 5
    del log
    # Without it (missing, unreadable), Kafka's rule: the first segment's base.
    assert open_log(segment_bytes=400).log_start_offset == first_base


def test_truncate_to_drops_everything_from_the_batch_holding_the_offset(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=400)
    for n in range(8):
        log.append_as_leader(make_batch([b"x" * 60] * 2), leader_epoch=n // 3)
    log.truncate_to(9)
    assert log.log_end_offset == 8
    assert offsets_in(log.read(6, 1 << 20).records) == [(6, 7)]
    assert log.latest_epoch() == 1
    assert log.append_as_leader(make_batch([b"z"]), 5).base_offset == 8
    log.truncate_to(0)
    assert (log.log_end_offset, log.size_in_bytes) == (0, 0)


def test_truncate_below_the_log_start_restarts_the_log_there(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log()
    fill(log, clock, 5)
    log.delete_records_before(4)
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    assert log.append_as_leader(make_batch([b"again"]), 0).base_offset == 2
