from __future__ import annotations

import os
from pathlib import Path

from brokercore.clock import FakeClock
from brokercore.log.records import RecordBatchHeader
from tests.brokercore.log.builders import make_batch, offsets_in, values_in
from tests.brokercore.log.conftest import OpenLog


def segment_files(directory: Path, suffix: str = ".log") -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(suffix))


def fill(log, clock, batches: int, size: int = 100) -> None:  # type: ignore[no-untyped-def]
    for n in range(batches):
        log.append_as_leader(
            make_batch([b"%d" % n + b"x" * size], timestamp=clock.time_ms()), leader_epoch=0
        )


def test_it_rolls_segments_by_size_naming_them_by_base_offset(
    open_log: OpenLog, log_dir: Path, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=500)
    fill(log, clock, 10)
    names = segment_files(log_dir)
    assert len(names) > 2
    assert names[0] == "00000000000000000000.log"
    assert all(os.path.getsize(log_dir / name) <= 500 for name in names)
    assert [int(name[:20]) for name in names] == [s.base_offset for s in log.segments]
    second_base = log.segments[1].base_offset
    assert offsets_in(log.read(0, 1 << 20).records)[-1] == (second_base - 1, second_base - 1)
    assert log.read(9, 1 << 20).first_offset == 9


def test_it_rolls_segments_by_time(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_ms=60_000)
    fill(log, clock, 3)
    assert len(log.segments) == 1
    clock.advance(61)
    fill(log, clock, 1)
    assert [s.base_offset for s in log.segments] == [0, 3]


def test_it_rolls_when_the_offset_index_is_full(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(index_interval_bytes=1, segment_index_bytes=8 * 3)
    fill(log, clock, 7)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]


def test_it_reopens_cleanly_with_the_same_contents(open_log: OpenLog, clock: FakeClock) -> None:
    log = open_log(segment_bytes=600, index_interval_bytes=150)
    fill(log, clock, 20)
    before = log.read(0, 1 << 20).records
    log.close()
    log = open_log(segment_bytes=600, index_interval_bytes=150)
    assert log.log_end_offset == 20
    assert log.read(0, 1 << 20).records == before
    assert log.read(13, 1 << 20).first_offset == 13


def test_it_rebuilds_deleted_or_corrupt_indexes(
    open_log: OpenLog, log_dir: Path, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=2000, index_interval_bytes=100)
    fill(log, clock, 30)
    expected = [log.read(n, 1 << 20).first_offset for n in range(30)]
    log.close()
    indexes = segment_files(log_dir, ".index")
    (log_dir / indexes[0]).unlink()
    (log_dir / indexes[1]).write_bytes(os.urandom(21))
    (log_dir / segment_files(log_dir, ".timeindex")[0]).write_bytes(b"\xff" * 24)
    log = open_log(segment_bytes=2000, index_interval_bytes=100)
    assert [log.read(n, 1 << 20).first_offset for n in range(30)] == expected
    assert (log_dir / indexes[0]).stat().st_size > 0
    assert log.offset_for_timestamp(clock.time_ms()) == (0, clock.time_ms())


def test_it_cuts_a_torn_tail_after_a_crash(
    open_log: OpenLog, log_dir: Path, clock: FakeClock
) -> None:
    log = open_log()
    fill(log, clock, 5)
    del log  # kill -9: no clean-shutdown marker
    active = log_dir / segment_files(log_dir)[-1]
    partial = make_batch([b"never acknowledged"])
    with active.open("ab") as file:
        file.write(partial[: len(partial) // 2])
    log = open_log()
    assert log.log_end_offset == 5
    assert len(offsets_in(log.read(0, 1 << 20).records)) == 5
    assert log.append_as_leader(make_batch([b"next"]), leader_epoch=0).base_offset == 5


def test_it_cuts_garbage_written_after_the_last_batch(
    open_log: OpenLog, log_dir: Path, clock: FakeClock
) -> None:
    log = open_log()
    fill(log, clock, 3)
    size = log.size_in_bytes
    del log
    with (log_dir / segment_files(log_dir)[-1]).open("ab") as file:
        file.write(os.urandom(300))
    log = open_log()
    assert (log.log_end_offset, log.size_in_bytes) == (3, size)


def test_it_truncates_at_a_batch_whose_crc_no_longer_matches(
    open_log: OpenLog, log_dir: Path, clock: FakeClock
) -> None:
    log = open_log()
    fill(log, clock, 6)
    third = log.read(2, 1 << 20, max_offset=3)
    position = sum(len(log.read(n, 1, max_offset=n + 1).records) for n in range(2))
    del log
    with (log_dir / segment_files(log_dir)[0]).open("r+b") as file:
        file.seek(position + len(third.records) - 1)
        file.write(b"\x00" if bytes(third.records)[-1] else b"\x01")
    log = open_log()
    assert log.log_end_offset == 2


def test_it_recovers_every_acknowledged_record_after_a_kill(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=700)
    fill(log, clock, 25)
    del log
    log = open_log(segment_bytes=700)
    values = [value for _, _, value in values_in(log.read(0, 1 << 20).records)]
    while len(values) < 25:
        more = log.read(len(values), 1 << 20).records
        values += [value for _, _, value in values_in(more)]
    assert [(v or b"")[:2].rstrip(b"x") for v in values] == [b"%d" % n for n in range(25)]


def test_it_fsyncs_after_flush_messages_and_moves_the_recovery_point(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(flush_messages=2)
    fill(log, clock, 3)
    assert log.recovery_point == 2
    assert log.active_segment.dirty  # the third message waits for the next flush


def test_headers_of_stored_batches_carry_assigned_offsets(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log()
    fill(log, clock, 2)
    data = bytes(log.read(0, 1 << 20).records)
    second = RecordBatchHeader.unpack(data, RecordBatchHeader.unpack(data).size)
    assert second.base_offset == 1


def test_the_periodic_flusher_fsyncs_only_once_flush_ms_has_passed(
    open_log: OpenLog, clock: FakeClock
) -> None:
    log = open_log(flush_ms=1000)
    log.append_as_leader(make_batch([b"a"]), 0)
    assert not log.flush_if_due()  # written just now: not due yet
    assert log.active_segment.dirty
    clock.advance(1.5)
    assert log.flush_if_due()
    assert not log.active_segment.dirty
    assert not log.flush_if_due()  # nothing pending


def test_after_a_crash_only_segments_past_the_checkpointed_recovery_point_are_rescanned(
    open_log: OpenLog, log_dir: Path, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=500)
    fill(log, clock, 10)
    log.flush()
    assert log.recovery_point == 10 and len(log.segments) > 2
    first = log_dir / segment_files(log_dir)[0]
    del log  # a kill -9: no clean-shutdown marker
    with first.open("r+b") as file:  # a flipped bit in the last record of the first segment
        file.seek(os.path.getsize(first) - 1)
        file.write(b"\x00" if file.read(1) != b"\x00" else b"\x01")

    trusting = open_log(segment_bytes=500, recovery_point=10)
    assert trusting.log_end_offset == 10  # fsynced below 10: not read again
    del trusting
    # The log dir's checkpoint is missing or unreadable: recover from the start, as Kafka.
    rescanned = open_log(segment_bytes=500)
    assert rescanned.log_end_offset < 10
    assert len(rescanned.segments) == 1
    assert rescanned.recovery_point == rescanned.log_end_offset


def test_a_log_of_an_earlier_version_reads_its_own_checkpoint_files_until_told_to_drop_them(
    open_log: OpenLog, log_dir: Path, clock: FakeClock
) -> None:
    log = open_log(segment_bytes=500)
    fill(log, clock, 10)
    del log
    (log_dir / "log-start-offset-checkpoint").write_text("0\n1\n3\n")
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\n")  # torn: 0

    log = open_log(segment_bytes=500)
    assert (log.log_start_offset, log.legacy_checkpoints) == (3, True)
    log.drop_legacy_checkpoints()
    assert not (log_dir / "log-start-offset-checkpoint").exists()
    assert not (log_dir / "recovery-point-offset-checkpoint").exists()
    log.close()
    # The log dir's entries win over any left.
    (log_dir / "log-start-offset-checkpoint").write_text("0\n1\n3\n")
    assert open_log(segment_bytes=500, log_start_offset=4).log_start_offset == 4
