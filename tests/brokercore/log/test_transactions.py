"""Transactions in the partition log: open transactions and the last stable offset, markers,
the transaction index of aborted transactions, and their recovery."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from brokercore.log import InvalidProducerEpochError, InvalidTxnStateError, PartitionLog
from brokercore.log.errors import TransactionCoordinatorFencedError
from brokercore.log.transactions import AbortedTxn
from brokercore.protocol.errors import ErrorCode
from tests.brokercore.log.builders import keyed, make_batch, values_in
from tests.brokercore.log.conftest import OpenLog
from tests.brokercore.log.test_compaction import everything

EPOCH = 0


def txn_batch(producer_id: int, sequence: int, count: int = 2, epoch: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, epoch, sequence, 2**31 - 1)
    for i in range(count):
        builder.append(i, 1_700_000_000_000 + i, None, f"{producer_id}-{sequence + i}".encode(),
                       [])
    return bytes(builder.build())


def _committed_and_aborted(log: PartitionLog) -> None:
    """offsets 0-1 plain, 2-3 producer 7 (committed at 6), 4-5 producer 8 (aborted at 7)."""
    log.append_as_leader(make_batch([b"a", b"b"]), EPOCH)
    log.append_as_leader(txn_batch(7, 0), EPOCH)
    log.append_as_leader(txn_batch(8, 0), EPOCH)
    assert log.first_unstable_offset() == 2
    log.append_marker(7, 0, True, 0, EPOCH)
    assert log.first_unstable_offset() == 4
    log.append_marker(8, 0, False, 0, EPOCH)


def test_the_first_open_transaction_bounds_the_stable_offset_until_its_marker(
    open_log: OpenLog,
) -> None:
    log = open_log()
    _committed_and_aborted(log)
    assert log.first_unstable_offset() == log.log_end_offset == 8
    assert log.aborted_transactions(0, 8) == [AbortedTxn(8, 4, 7, 8)]
    assert log.aborted_transactions(8, 8) == []
    assert log.producer_state()[7].current_txn_first_offset == -1
    # The markers are control batches: readers see them as batches, not as records.
    assert [value for _, _, value in values_in(log.read(0, 2**20).records)][:6] == [
        b"a", b"b", b"7-0", b"7-1", b"8-0", b"8-1"]


def test_the_transaction_index_and_open_transactions_are_rebuilt_after_a_crash(
    open_log: OpenLog,
) -> None:
    log = open_log()
    _committed_and_aborted(log)
    log.append_as_leader(txn_batch(9, 0), EPOCH)  # still open at the crash
    index = next(log.directory.glob("*.txnindex"))
    index.unlink()  # lost, or never fsynced
    del log  # a crash: no clean close

    recovered = open_log()
    assert recovered.aborted_transactions(0, 10) == [AbortedTxn(8, 4, 7, 8)]
    assert recovered.first_unstable_offset() == 8
    assert recovered.producer_state()[9].current_txn_first_offset == 8


def test_a_clean_close_keeps_the_open_transactions(open_log: OpenLog) -> None:
    log = open_log()
    _committed_and_aborted(log)
    log.append_as_leader(txn_batch(9, 0), EPOCH)
    log.close()
    reopened = open_log()
    assert reopened.first_unstable_offset() == 8
    assert reopened.aborted_transactions(0, 10) == [AbortedTxn(8, 4, 7, 8)]


def test_truncation_forgets_the_aborts_it_removes(open_log: OpenLog) -> None:
    log = open_log()
    _committed_and_aborted(log)
    log.truncate_to(7)  # the abort marker goes: producer 8's transaction is open again
    assert log.aborted_transactions(0, 10) == []
    assert log.first_unstable_offset() == 4


def test_markers_of_a_fenced_epoch_or_an_older_coordinator_are_refused(
    open_log: OpenLog,
) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(7, 0, epoch=3), EPOCH)
    log.append_marker(7, 3, False, 5, EPOCH)
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(7, 2, False, 5, EPOCH)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(7, 3, True, 4, EPOCH)
    # A zombie's late write at its old epoch is refused too.
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(7, 2, epoch=2), EPOCH)


def test_compaction_drops_aborted_records_instead_of_letting_them_shadow_committed_ones(
    open_log: OpenLog,
) -> None:
    log = open_log(cleanup_policy=frozenset({"compact"}), min_cleanable_dirty_ratio=0.0)
    log.append_as_leader(keyed([(b"k", b"committed")]), EPOCH)
    builder = DefaultRecordBatchBuilder(2, 0, True, 5, 0, 0, 2**31 - 1)
    builder.append(0, 1_700_000_000_000, b"k", b"aborted", [])
    log.append_as_leader(bytes(builder.build()), EPOCH)
    log.append_marker(5, 0, False, 0, EPOCH)
    log.roll()
    log.append_as_leader(keyed([(b"other", b"x")]), EPOCH)
    log.clean()
    data = [(key, value) for _, key, value in everything(log) if key in (b"k", b"other")]
    assert data == [(b"k", b"committed"), (b"other", b"x")]


def test_an_open_transaction_deleted_from_the_start_holds_nothing_below_the_log_start(
    open_log: OpenLog,
) -> None:
    log = open_log()
    log.append_as_leader(txn_batch(7, 0, count=4), EPOCH)
    log.append_as_leader(txn_batch(7, 4, count=4), EPOCH)
    log.delete_records_before(4)
    assert log.first_unstable_offset() == 4


def test_a_plain_batch_from_a_producer_with_an_open_transaction_is_refused(
    open_log: OpenLog,
) -> None:
    """Kafka's rule: INVALID_TXN_STATE, nothing written; once the marker closes the
    transaction, the same producer's plain batch at the next sequence goes in."""
    log = open_log()
    log.append_as_leader(txn_batch(7, 0), EPOCH)
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError) as refused:
        log.append_as_leader(make_batch([b"plain"], producer=(7, 0, 2)), EPOCH)
    assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == end
    log.append_marker(7, 0, True, 0, EPOCH)
    log.append_as_leader(make_batch([b"plain"], producer=(7, 0, 2)), EPOCH)
    assert log.log_end_offset == end + 2
