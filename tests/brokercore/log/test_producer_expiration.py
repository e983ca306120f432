"""Producer id expiration in the partition log (KIP-854, `producer.id.expiration.ms`): a
producer idle that long, with no open transaction, is forgotten, as are verifications
started that long ago; a restart does not bring one back. Driven with the fake clock."""

from __future__ import annotations

import pytest

from brokercore.clock import FakeClock
from brokercore.log import InvalidTxnStateError, OutOfOrderSequenceError, PartitionLog
from tests.brokercore.log.builders import make_batch
from tests.brokercore.log.conftest import OpenLog
from tests.brokercore.log.test_transactions import EPOCH, txn_batch

EXPIRATION_MS = 60_000
IDLE, TXN = 4000, 4001  # an idempotent producer; a transactional one


def produce(log: PartitionLog, clock: FakeClock, seq: int, pid: int = IDLE,
            timestamp: int | None = None) -> bool:
    """Append one record of `pid` at `seq`, stamped now unless told; True if it was new."""
    batch = make_batch([b"r"], producer=(pid, 0, seq),
                       timestamp=clock.time_ms() if timestamp is None else timestamp)
    return not log.append_as_leader(batch, EPOCH).duplicate


def test_a_producer_expires_once_its_last_write_is_expiration_old_and_not_before(
    open_log: OpenLog, clock: FakeClock,
) -> None:
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)
    produce(log, clock, 0)
    clock.advance(30)
    produce(log, clock, 1)  # the clock starts again at its last write
    clock.advance(59)
    assert log.remove_expired_producers() == 0
    assert not produce(log, clock, 1)  # a retry: still remembered
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, clock, 9)
    clock.advance(1)
    assert log.remove_expired_producers() == 1
    assert IDLE not in log.producer_state()
    assert produce(log, clock, 9)  # unknown now: any sequence starts it again


def test_a_producer_that_expired_is_new_when_it_writes_again(
    open_log: OpenLog, clock: FakeClock,
) -> None:
    """As in Kafka 4.0 (KIP-360): an unknown producer may write at any sequence, so its
    retry of a batch written before it expired is written again."""
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)
    produce(log, clock, 0)
    produce(log, clock, 1)
    clock.advance(60)
    log.remove_expired_producers()
    end = log.log_end_offset
    assert produce(log, clock, 1)  # no longer answered as a duplicate: written twice
    assert log.log_end_offset == end + 1
    assert produce(log, clock, 2)
    assert log.producer_state()[IDLE].last_seq == 2


@pytest.mark.parametrize(("timestamp_type", "expired"), [
    ("CreateTime", True), ("LogAppendTime", False)])
def test_expiration_counts_from_the_batch_max_timestamp_as_stored(
    open_log: OpenLog, clock: FakeClock, timestamp_type: str, expired: bool,
) -> None:
    """Kafka compares the last batch's max timestamp: the producer's own with CreateTime,
    the broker's append time with LogAppendTime, never when the broker received it."""
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS,
                   message_timestamp_type=timestamp_type)
    produce(log, clock, 0, timestamp=clock.time_ms() - 2 * EXPIRATION_MS)
    assert log.remove_expired_producers() == int(expired)
    assert (IDLE not in log.producer_state()) is expired


def test_a_producer_with_an_open_transaction_never_expires(
    open_log: OpenLog, clock: FakeClock,
) -> None:
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)
    log.append_as_leader(txn_batch(TXN, 0), EPOCH)  # stamped with old timestamps
    clock.advance(10 * 60)
    assert log.remove_expired_producers() == 0
    assert log.first_unstable_offset() == 0
    log.append_marker(TXN, 0, True, 0, EPOCH)  # ends it now: the marker's time counts
    clock.advance(59)
    assert log.remove_expired_producers() == 0
    clock.advance(1)
    assert log.remove_expired_producers() == 1
    assert log.producer_state() == {}


def test_a_verification_expires_counted_from_when_it_started(
    open_log: OpenLog, clock: FakeClock,
) -> None:
    """A verification the coordinator refused leaves its entry until the producer's next
    transactional write here; Kafka drops it once it is producer.id.expiration.ms old,
    whatever verifications joined it later."""
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)
    guard = log.maybe_start_transaction_verification(TXN, 0, 0)
    clock.advance(50)
    assert log.maybe_start_transaction_verification(TXN, 0, 0) is guard  # joins it
    clock.advance(9)
    log.remove_expired_producers()
    assert TXN in log.producers.verifications
    clock.advance(1)
    log.remove_expired_producers()
    assert log.producers.verifications == {}
    with pytest.raises(InvalidTxnStateError):  # the guard verifies nothing any more
        log.append_as_leader(txn_batch(TXN, 0), EPOCH, guard)


@pytest.mark.parametrize("clean", [True, False])
def test_a_restart_brings_back_only_producers_that_have_not_expired(
    open_log: OpenLog, clock: FakeClock, clean: bool,
) -> None:
    """A clean close snapshots the producers; a crash leaves the log to replay. Either way
    the producers idle past the expiration by the time the log opens stay gone, as Kafka
    leaves them out of the snapshot it loads, and one with an open transaction stays."""
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)
    log.append_as_leader(txn_batch(TXN, 0), EPOCH)
    produce(log, clock, 0)
    clock.advance(40)
    produce(log, clock, 0, pid=IDLE + 10)  # younger: kept
    if clean:
        log.close()
    clock.advance(30)  # the first producer's last write is 70 s old, the other's 30 s
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)
    assert set(log.producer_state()) == {TXN, IDLE + 10}
    assert log.first_unstable_offset() == 0
    assert produce(log, clock, 5)  # new again: any sequence
    assert not produce(log, clock, 0, pid=IDLE + 10)  # still answered as a retry


@pytest.mark.parametrize("clean", [True, False])
def test_a_producer_expired_before_a_restart_does_not_come_back_from_the_log(
    open_log: OpenLog, clock: FakeClock, clean: bool,
) -> None:
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)
    produce(log, clock, 0)
    produce(log, clock, 1)
    clock.advance(60)
    log.remove_expired_producers()
    if clean:
        log.close()
    log = open_log(producer_id_expiration_ms=EXPIRATION_MS)  # its batches are still there
    assert log.producer_state() == {}
    assert produce(log, clock, 1)  # not taken for a retry
