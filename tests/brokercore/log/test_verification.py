"""Transaction verification guards in the partition log (KIP-890 part 1): a transactional
batch is appended only if it continues its producer's open transaction here or carries the
guard its verification started with, and only if nothing of that producer's transactions
happened here since."""

from __future__ import annotations

import pytest

from brokercore.log import InvalidTxnStateError, OutOfOrderSequenceError
from brokercore.log.verification import SENTINEL
from tests.brokercore.log.conftest import OpenLog
from tests.brokercore.log.test_transactions import EPOCH, txn_batch

PRODUCER = 7


def test_a_first_transactional_write_needs_its_verification_guard(open_log: OpenLog) -> None:
    log = open_log()
    guard = log.maybe_start_transaction_verification(PRODUCER, 0, 0)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(PRODUCER, 0), EPOCH, SENTINEL)
    log.append_as_leader(txn_batch(PRODUCER, 0), EPOCH, guard)
    # The transaction is open here now: the next write needs no verification...
    assert log.maybe_start_transaction_verification(PRODUCER, 2, 0) is SENTINEL
    log.append_as_leader(txn_batch(PRODUCER, 2), EPOCH, SENTINEL)
    # ...and the guard is spent: it cannot open another transaction after this one ends.
    log.append_marker(PRODUCER, 0, True, 0, EPOCH)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(PRODUCER, 4), EPOCH, guard)


def test_a_marker_between_verification_and_append_voids_the_guard(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(PRODUCER, 0), EPOCH)  # a transaction open before
    log.append_marker(PRODUCER, 0, False, 0, EPOCH)
    guard = log.maybe_start_transaction_verification(PRODUCER, 2, 0)
    # The coordinator vouched for a transaction that an abort marker has ended since.
    log.append_marker(PRODUCER, 0, False, 0, EPOCH)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(PRODUCER, 2), EPOCH, guard)
    assert log.first_unstable_offset() == log.log_end_offset


def test_an_open_transaction_ended_meanwhile_refuses_a_write_without_a_guard(
    open_log: OpenLog,
) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(PRODUCER, 0), EPOCH)
    assert log.maybe_start_transaction_verification(PRODUCER, 2, 0) is SENTINEL
    log.append_marker(PRODUCER, 0, True, 0, EPOCH)  # while the write waited
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn_batch(PRODUCER, 2), EPOCH, SENTINEL)


def test_verifications_at_once_share_a_guard_and_a_later_batch_cannot_overtake(
    open_log: OpenLog,
) -> None:
    log = open_log()
    first = log.maybe_start_transaction_verification(PRODUCER, 0, 0)
    second = log.maybe_start_transaction_verification(PRODUCER, 2, 0)
    assert second is first
    # A producer new here may start at any sequence, but not past one being verified.
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(txn_batch(PRODUCER, 2), EPOCH, second)
    log.append_as_leader(txn_batch(PRODUCER, 0), EPOCH, first)
    log.append_as_leader(txn_batch(PRODUCER, 2), EPOCH, SENTINEL)
    assert log.log_end_offset == 4


def test_without_a_guard_verification_is_not_enforced(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(PRODUCER, 0), EPOCH)  # as with verification off
    assert log.first_unstable_offset() == 0
