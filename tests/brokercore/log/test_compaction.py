from __future__ import annotations

from pathlib import Path

import pytest

from brokercore.clock import FakeClock
from brokercore.log import PartitionLog, cleaner
from tests.brokercore.log.builders import CODECS, keyed, values_in
from tests.brokercore.log.conftest import OpenLog

COMPACT = {
    "cleanup_policy": frozenset({"compact"}),
    "segment_bytes": 300,
    "min_cleanable_dirty_ratio": 0.0,
}


def everything(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data.records:
            break
        records = values_in(data.records)
        out += [r for r in records if r[0] >= offset]
        offset = max(r[0] for r in records) + 1 if records else offset + 1
        offset = max(offset, _next_segment(log, data.first_offset))
    return out


def _next_segment(log: PartitionLog, offset: int) -> int:
    later = [s.base_offset for s in log.segments if s.base_offset > offset]
    return later[0] if later and not log.read(offset, 1 << 20).records else offset


def latest_by_key(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    return {key: value for _, key, value in everything(log)}


@pytest.mark.parametrize("codec", CODECS)
def test_it_keeps_only_the_latest_value_per_key(open_log: OpenLog, codec: int) -> None:
    log = open_log(**COMPACT)
    for n in range(30):
        log.append_as_leader(keyed([(b"k%d" % (n % 4), b"v%d" % n)], codec=codec), 0)
    before = latest_by_key(log)
    end = log.log_end_offset
    assert log.clean() > 0
    after = everything(log)
    assert latest_by_key(log) == before
    closed_end = log.active_segment.base_offset
    closed_keys = [key for offset, key, _ in after if offset < closed_end]
    assert len(closed_keys) == len(set(closed_keys))
    assert log.log_end_offset == end
    offsets = [offset for offset, _, _ in after]
    assert offsets == sorted(offsets)


def test_it_never_rewrites_the_active_segment(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACT, "segment_bytes": 1 << 20})
    for n in range(10):
        log.append_as_leader(keyed([(b"same", b"v%d" % n)]), 0)
    assert log.clean() == 0
    assert len(everything(log)) == 10


def test_it_drops_tombstones_only_after_delete_retention(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(**{**COMPACT, "delete_retention_ms": 60_000})
    for n in range(6):
        log.append_as_leader(keyed([(b"k%d" % n, b"v")], timestamp=clock.time_ms()), 0)
    log.append_as_leader(keyed([(b"k0", None)], timestamp=clock.time_ms()), 0)
    for n in range(6):
        log.append_as_leader(keyed([(b"pad%d" % n, b"p" * 50)], timestamp=clock.time_ms()), 0)
    log.clean()
    assert (b"k0", None) in [(k, v) for _, k, v in everything(log)]
    clock.advance(120)
    log.append_as_leader(keyed([(b"late", b"x")], timestamp=clock.time_ms()), 0)
    log.roll()
    log.clean()
    keys = [k for _, k, _ in everything(log)]
    assert b"k0" not in keys and b"k1" in keys


def test_it_respects_the_dirty_ratio(open_log: OpenLog) -> None:
    log = open_log(**{**COMPACT, "min_cleanable_dirty_ratio": 0.5})
    for n in range(20):
        log.append_as_leader(keyed([(b"k", b"v%d" % n)]), 0)
    assert log.clean() > 0
    assert log.clean() == 0  # nothing new since the last pass


def test_a_crash_after_the_swap_commit_point_completes_on_open(
    open_log: OpenLog, log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(**COMPACT)
    for n in range(30):
        log.append_as_leader(keyed([(b"k%d" % (n % 3), b"v%d" % n)]), 0)
    expected = latest_by_key(log)

    def crash(*args: object) -> None:
        raise SystemExit("power cut")

    monkeypatch.setattr(cleaner, "install_swap", crash)
    with pytest.raises(SystemExit):
        log.clean()
    assert list(log_dir.glob("*.log.swap"))
    monkeypatch.undo()
    log = open_log(**COMPACT)
    assert not list(log_dir.glob("*.log.swap"))
    assert latest_by_key(log) == expected
    assert log.log_end_offset == 30


def test_a_crash_before_the_swap_leaves_the_old_segment(open_log: OpenLog, log_dir: Path) -> None:
    log = open_log(**COMPACT)
    for n in range(30):
        log.append_as_leader(keyed([(b"k%d" % (n % 3), b"v%d" % n)]), 0)
    before = everything(log)
    del log
    first = sorted(log_dir.glob("*.log"))[0]
    first.with_name(first.name + ".cleaned").write_bytes(b"half-written")
    log = open_log(**COMPACT)
    assert not list(log_dir.glob("*.cleaned"))
    assert everything(log) == before


def test_idempotent_producer_state_survives_compaction(open_log: OpenLog) -> None:
    log = open_log(**COMPACT)
    for n in range(10):
        log.append_as_leader(keyed([(b"k", b"v%d" % n)], producer=(7, 0, n)), 0)
    log.roll()
    log.clean()
    log.close()
    log = open_log(**COMPACT)
    assert log.append_as_leader(keyed([(b"k", b"v9")], producer=(7, 0, 9)), 0).duplicate
