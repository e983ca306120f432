from __future__ import annotations

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
    assert LeaderEpochCache(tmp_path).entries == [(2, 15), (4, 20)]
