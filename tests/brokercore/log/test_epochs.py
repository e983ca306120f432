from __future__ import annotations

from pathlib import Path

from brokercore.log.epoch_cache import LeaderEpochCache
from tests.brokercore.log.builders import make_batch
from tests.brokercore.log.conftest import OpenLog


def test_it_answers_offset_for_leader_epoch_like_kafka(open_log: OpenLog) -> None:
    log = open_log()
    for epoch in (1, 1, 3, 3, 5):
        log.append_as_leader(make_batch([b"x", b"y"]), leader_epoch=epoch)
    assert log.latest_epoch() == 5
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(1) == (1, 4)
    assert log.end_offset_for_epoch(2) == (1, 4)
    assert log.end_offset_for_epoch(3) == (3, 8)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(6) == (-1, -1)


def test_the_epoch_cache_is_persisted_and_follows_truncation(open_log: OpenLog, log_dir) -> None:  # type: ignore[no-untyped-def]
    log = open_log()
    for epoch in (1, 2, 3):
        log.append_as_leader(make_batch([b"x", b"y"]), leader_epoch=epoch)
    assert (log_dir / "leader-epoch-checkpoint").read_text().split() == [
        "0",
        "3",
        "1",
        "0",
        "2",
        "2",
        "3",
        "4",
    ]
    log.truncate_to(4)
    del log
    log = open_log()
    assert log.latest_epoch() == 2
    assert log.end_offset_for_epoch(2) == (2, 4)


def test_moving_the_log_start_clamps_the_first_epoch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(4, 20)
    cache.truncate_from_start(15)
    assert cache.entries == [(2, 15), (4, 20)]
    assert cache.dirty  # written with the next flush, not on the caller's path
    assert LeaderEpochCache(tmp_path).entries == [(1, 0), (2, 10), (4, 20)]
    cache.persist()
    assert LeaderEpochCache(tmp_path).entries == [(2, 15), (4, 20)]


def test_a_crash_before_a_clamped_epoch_is_written_loses_nothing(
        open_log: OpenLog) -> None:
    log = open_log(segment_bytes=200)
    for epoch in range(4):
        log.append_as_leader(make_batch([b"x" * 60] * 2), leader_epoch=epoch)
    log.flush()
    log.delete_records_before(5)
    assert log.epochs.dirty
    del log  # a crash; the log dir's checkpoint had the new log start

    log = open_log(segment_bytes=200, log_start_offset=5)

    assert log.epochs.entries == [(2, 5), (3, 6)]


def test_a_deferred_epoch_is_relearned_from_its_batches_after_a_crash(
        open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"]), leader_epoch=1)
    log.assign_epoch(2, log.log_end_offset, persist=False)  # a leadership's, not written yet
    log.append_as_leader(make_batch([b"b", b"c"]), leader_epoch=2)
    assert log.epochs.dirty
    on_disk = (log_dir / "leader-epoch-checkpoint").read_text()
    del log  # a crash before the disk thread wrote it

    log = open_log()

    assert on_disk.split() == ["0", "1", "1", "0"]
    assert log.latest_epoch() == 2
    assert log.end_offset_for_epoch(1) == (1, 1)


def test_a_flush_writes_a_deferred_epoch_before_moving_the_recovery_point(
        open_log: OpenLog, log_dir: Path) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"a"]), leader_epoch=1)
    log.assign_epoch(4, log.log_end_offset, persist=False)
    log.append_as_leader(make_batch([b"b"]), leader_epoch=4)

    log.flush()

    assert not log.epochs.dirty
    assert LeaderEpochCache(log_dir).entries == [(1, 0), (4, 1)]


def test_an_older_snapshot_never_overwrites_a_newer_checkpoint(log_dir: Path) -> None:
    log_dir.mkdir()
    cache = LeaderEpochCache(log_dir)
    cache.assign(1, 0, persist=False)
    older = cache.snapshot()
    cache.assign(2, 5)  # written at once

    cache.persist(older)  # a disk thread that was late

    assert LeaderEpochCache(log_dir).entries == [(1, 0), (2, 5)]
