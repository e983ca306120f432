from __future__ import annotations

import pytest

from brokercore.log import InvalidProducerEpochError, OutOfOrderSequenceError
from brokercore.log.records import INT32_MAX
from tests.brokercore.log.builders import make_batch
from tests.brokercore.log.conftest import OpenLog

PID = 4000


def produce(log, seq: int, count: int = 2, epoch: int = 0, pid: int = PID):  # type: ignore[no-untyped-def]
    return log.append_as_leader(
        make_batch([b"r"] * count, producer=(pid, epoch, seq)), leader_epoch=0
    )


def test_it_answers_a_retry_with_the_original_offsets_and_writes_nothing(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0)
    first = produce(log, 2)
    produce(log, 4)
    size = log.size_in_bytes
    retry = produce(log, 2)
    assert retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset)
    assert log.size_in_bytes == size


def test_it_only_remembers_the_last_five_batches(open_log: OpenLog) -> None:
    log = open_log()
    for n in range(7):
        produce(log, 2 * n)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0)
    assert produce(log, 4).duplicate


def test_it_rejects_a_gap_in_sequence(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 5)
    assert log.log_end_offset == 2


def test_it_fences_an_older_epoch(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=2)


def test_a_new_epoch_must_start_at_sequence_zero(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, 0, epoch=1)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 2, epoch=2)
    assert not produce(log, 0, epoch=2).duplicate


def test_an_unknown_producer_may_start_at_any_sequence(open_log: OpenLog) -> None:
    log = open_log()
    assert produce(log, 17).base_offset == 0
    assert produce(log, 19).base_offset == 2


def test_sequences_wrap_at_int32_max(open_log: OpenLog) -> None:
    log = open_log()
    produce(log, INT32_MAX - 1, count=2)
    assert produce(log, 0, count=1).base_offset == 2
    assert produce(log, 1, count=1).base_offset == 3


def test_a_rejected_batch_leaves_the_whole_record_set_unwritten(open_log: OpenLog) -> None:
    log = open_log()
    good = make_batch([b"a"], producer=(PID, 0, 0))
    gap = make_batch([b"b"], producer=(PID, 0, 9))
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(good + gap, leader_epoch=0)
    assert log.log_end_offset == 0
    assert not produce(log, 0, count=1).duplicate


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_a_restart(open_log: OpenLog, clean: bool) -> None:
    log = open_log()
    produce(log, 0)
    first = produce(log, 2)
    if clean:
        log.close()
    log = open_log()
    retry = produce(log, 2)
    assert retry.duplicate and retry.base_offset == first.base_offset
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 9)
    assert produce(log, 4).base_offset == 4
