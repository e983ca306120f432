from __future__ import annotations

import struct

import pytest

from brokercore.log import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchHeader,
    RecordTooLargeError,
    UnsupportedMessageFormatError,
)
from brokercore.log.records import crc_ok
from tests.brokercore.log.builders import keyed, make_batch, offsets_in, values_in
from tests.brokercore.log.conftest import OpenLog


def fill(log, batches: int = 10, records: int = 3) -> None:  # type: ignore[no-untyped-def]
    for n in range(batches):
        log.append_as_leader(make_batch([b"v%d" % n] * records), leader_epoch=0)


def test_it_assigns_contiguous_offsets_and_returns_the_bytes_as_stored(open_log: OpenLog) -> None:
    log = open_log()
    first = log.append_as_leader(make_batch([b"a", b"b", b"c"]), leader_epoch=3)
    second = log.append_as_leader(make_batch([b"d"]), leader_epoch=3)
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 2, 3)
    assert (second.base_offset, second.last_offset) == (3, 3)
    assert log.log_end_offset == 4
    data = log.read(0, 1 << 20)
    assert data.first_offset == 0
    assert [value for _, _, value in values_in(data.records)] == [b"a", b"b", b"c", b"d"]
    header = RecordBatchHeader.unpack(bytes(data.records))
    assert header.partition_leader_epoch == 3
    assert crc_ok(bytes(data.records), 0, header)


def test_it_returns_the_whole_batch_containing_a_mid_batch_fetch_offset(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, batches=4, records=5)
    data = log.read(7, 1 << 20)
    assert data.first_offset == 5
    assert offsets_in(data.records)[0] == (5, 9)


def test_it_never_returns_a_batch_starting_at_or_past_max_offset(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, batches=4, records=5)
    assert offsets_in(log.read(0, 1 << 20, max_offset=10).records) == [(0, 4), (5, 9)]
    assert offsets_in(log.read(0, 1 << 20, max_offset=11).records)[-1] == (10, 14)
    assert log.read(10, 1 << 20, max_offset=10).records == b""


def test_it_returns_one_oversized_batch_only_when_min_one_batch(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(make_batch([b"x" * 5000]), leader_epoch=0)
    log.append_as_leader(make_batch([b"y"]), leader_epoch=0)
    assert offsets_in(log.read(0, 100).records) == [(0, 0)]
    assert log.read(0, 100, min_one_batch=False).records == b""
    assert offsets_in(log.read(0, 5200).records) == [(0, 0), (1, 1)]


def test_it_stops_at_max_bytes_on_batch_boundaries(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, batches=10)
    one = len(log.read(0, 1, min_one_batch=True).records)
    assert len(offsets_in(log.read(0, one * 3 + one // 2).records)) == 3


def test_it_rejects_offsets_outside_the_log_and_is_empty_at_the_end(open_log: OpenLog) -> None:
    log = open_log()
    fill(log, batches=2)
    assert log.read(6, 100).records == b""
    assert log.read(6, 100).first_offset == -1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    log.delete_records_before(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    assert offsets_in(log.read(4, 1 << 20).records) == [(3, 5)]


def test_it_writes_nothing_when_any_batch_of_a_record_set_is_corrupt(open_log: OpenLog) -> None:
    log = open_log()
    good = make_batch([b"ok"])
    bad = bytearray(make_batch([b"flipped"]))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bytes(bad), leader_epoch=0)
    assert log.log_end_offset == 0
    assert log.size_in_bytes == 0
    assert log.append_as_leader(good + good, leader_epoch=0).last_offset == 1


def test_it_rejects_truncated_record_sets(open_log: OpenLog) -> None:
    log = open_log()
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch([b"x"])[:-3], leader_epoch=0)
    assert log.log_end_offset == 0


def test_it_rejects_old_message_formats(open_log: OpenLog) -> None:
    log = open_log()
    v1 = bytearray(make_batch([b"x"]))
    v1[16] = 1
    with pytest.raises(UnsupportedMessageFormatError):
        log.append_as_leader(bytes(v1), leader_epoch=0)


def test_it_rejects_batches_over_max_message_bytes(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=1000)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch([b"x" * 2000]), leader_epoch=0)
    assert log.log_end_offset == 0


def test_it_rejects_a_batch_whose_count_disagrees_with_its_last_offset_delta(
    open_log: OpenLog,
) -> None:
    log = open_log()
    batch = bytearray(make_batch([b"a", b"b"]))
    struct.pack_into(">i", batch, 57, 1)  # recordsCount lies inside the CRC: re-stamp it
    from brokercore.log.records import _restamp_crc

    _restamp_crc(batch, 0, len(batch))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(batch), leader_epoch=0)


def test_it_rejects_keyless_records_on_compacted_topics(open_log: OpenLog) -> None:
    log = open_log(cleanup_policy=frozenset({"compact"}))
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(keyed([(b"k", b"v")]) + make_batch([b"no key"]), leader_epoch=0)
    assert log.log_end_offset == 0
    assert log.append_as_leader(keyed([(b"k", b"v")]), leader_epoch=0).base_offset == 0


def test_it_stamps_log_append_time_and_keeps_the_crc_valid(open_log: OpenLog, clock) -> None:  # type: ignore[no-untyped-def]
    log = open_log(message_timestamp_type="LogAppendTime")
    result = log.append_as_leader(make_batch([b"a", b"b"], timestamp=5), leader_epoch=0)
    assert result.log_append_time == clock.time_ms()
    stored = bytes(log.read(0, 1 << 20).records)
    header = RecordBatchHeader.unpack(stored)
    assert header.is_log_append_time
    assert header.max_timestamp == clock.time_ms()
    assert crc_ok(stored, 0, header)
    assert log.offset_for_timestamp(clock.time_ms()) == (0, clock.time_ms())


def test_it_finds_offsets_by_timestamp_and_the_max_timestamp(open_log: OpenLog) -> None:
    log = open_log(index_interval_bytes=1)
    log.append_as_leader(make_batch([b"a", b"b"], timestamps=[100, 300]), leader_epoch=0)
    log.append_as_leader(make_batch([b"c", b"d"], timestamps=[200, 250]), leader_epoch=0)
    assert log.offset_for_timestamp(50) == (0, 100)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(260) == (1, 300)
    assert log.offset_for_timestamp(301) is None
    assert log.max_timestamp() == (300, 1)


def test_follower_appends_keep_the_leaders_offsets_and_epochs(open_log: OpenLog, tmp_path) -> None:  # type: ignore[no-untyped-def]
    leader = open_log()
    leader.append_as_leader(make_batch([b"a", b"b"]), leader_epoch=1)
    leader.append_as_leader(make_batch([b"c"]), leader_epoch=2)
    from brokercore.clock import FakeClock
    from brokercore.log import LogConfig, PartitionLog

    follower = PartitionLog.open(tmp_path / "follower-0", LogConfig(), FakeClock())
    result = follower.append_as_follower(leader.read(0, 1 << 20).records)
    assert (result.base_offset, result.last_offset) == (0, 2)
    assert follower.read(0, 1 << 20).records == leader.read(0, 1 << 20).records
    assert follower.end_offset_for_epoch(1) == (1, 2)
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(leader.read(2, 1 << 20).records)
