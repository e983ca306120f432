"""The transaction coordinator's state machine, driven with a fake clock and no sockets:
`__transaction_state` in memory, markers written straight into real partition logs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from brokercore.clock import FakeClock
from brokercore.coordinator.loading import LOAD_SLICE_RECORDS
from brokercore.log import LogConfig, LogError, PartitionLog
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition
from brokercore.txn import TransactionCoordinator, TxnConfig, TxnError, TxnState
from brokercore.txn.records import TxnRecord
from brokercore.txn.state_topic import MemoryTransactionStateTopic

TP = TopicPartition("orders", 0)


class LogMarkers:
    """Markers written into real partition logs, as their leaders would; `down` partitions
    refuse them until they come back."""

    def __init__(self, directory: Path, clock: FakeClock) -> None:
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.directory = directory
        self.clock = clock
        self.down: set[TopicPartition] = set()

    def log(self, tp: TopicPartition) -> PartitionLog:
        if tp not in self.logs:
            self.logs[tp] = PartitionLog.open(self.directory / str(tp), LogConfig(), self.clock)
        return self.logs[tp]

    async def write(self, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, partitions: frozenset[TopicPartition],
                    ) -> set[TopicPartition]:
        done = set()
        for tp in partitions - self.down:
            try:
                self.log(tp).append_marker(producer_id, producer_epoch, commit,
                                           coordinator_epoch, 0)
            except LogError:
                continue
            done.add(tp)
        return done

    def close(self) -> None:
        pass


Make = Callable[..., TransactionCoordinator]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store() -> MemoryTransactionStateTopic:
    return MemoryTransactionStateTopic(num_partitions=4)


@pytest.fixture
def markers(tmp_path: Path, clock: FakeClock) -> LogMarkers:
    return LogMarkers(tmp_path, clock)


@pytest.fixture
def make(store: MemoryTransactionStateTopic, markers: LogMarkers, clock: FakeClock) -> Make:
    ids = iter(range(1000, 2000))

    async def allocate() -> int:
        return next(ids)

    def coordinator(load_slice_records: int = LOAD_SLICE_RECORDS,
                    **config: int) -> TransactionCoordinator:
        c = TransactionCoordinator(store, clock, TxnConfig(**config), markers, allocate)
        c.load_slice_records = load_slice_records
        c.refresh_partitions()
        return c

    return coordinator


def transactional_batch(producer_id: int, epoch: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, True, producer_id, epoch, 0, 2**31 - 1)
    builder.append(0, 1_700_000_000_000, None, b"v", [])
    return bytes(builder.build())


async def settled(c: TransactionCoordinator, transactional_id: str) -> TxnState:
    """The state once the background work (abort, markers) has completed the transaction."""
    for _ in range(200):
        meta = c.txns[transactional_id]
        if meta.record.state.completed and not meta.pending:
            break
        await asyncio.sleep(0.01)
    return c.txns[transactional_id].record.state


async def test_each_init_bumps_the_epoch_and_a_spent_epoch_takes_a_new_producer_id(
    make: Make,
) -> None:
    c = make()
    first = await c.requests.init_producer_id("t", 60_000, -1, -1)
    second = await c.requests.init_producer_id("t", 60_000, -1, -1)
    assert (first[1], second) == (0, (first[0], 1))
    meta = c.txns["t"]
    meta.record = TxnRecord(first[0], 32766, 60_000, TxnState.EMPTY)  # as if bumped 32,766 times
    assert await c.requests.init_producer_id("t", 60_000, -1, -1) == (first[0] + 1, 0)


async def test_a_commit_writes_markers_then_completes(make: Make, markers: LogMarkers) -> None:
    c = make()
    pid, epoch = await c.requests.init_producer_id("t", 60_000, -1, -1)
    await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    markers.log(TP).append_as_leader(transactional_batch(pid, epoch), 0)
    assert markers.log(TP).first_unstable_offset() == 0
    await c.requests.end_txn("t", pid, epoch, commit=True)
    assert await settled(c, "t") is TxnState.COMPLETE_COMMIT
    assert markers.log(TP).first_unstable_offset() == markers.log(TP).log_end_offset == 2
    await c.requests.end_txn("t", pid, epoch, commit=True)  # a retry is answered NONE
    with pytest.raises(TxnError) as refused:
        await c.requests.end_txn("t", pid, epoch, commit=False)
    assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE


async def test_while_its_markers_go_out_a_decided_transaction_refuses_the_other_decision(
    make: Make, markers: LogMarkers,
) -> None:
    c = make()
    pid, epoch = await c.requests.init_producer_id("t", 60_000, -1, -1)
    await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    markers.down.add(TP)  # the leader is away: the commit stays prepared
    await c.requests.end_txn("t", pid, epoch, commit=True)
    assert c.txns["t"].record.state is TxnState.PREPARE_COMMIT
    for commit, code in ((True, ErrorCode.CONCURRENT_TRANSACTIONS),  # a retry: wait
                         (False, ErrorCode.INVALID_TXN_STATE)):  # as Kafka answers it
        with pytest.raises(TxnError) as refused:
            await c.requests.end_txn("t", pid, epoch, commit=commit)
        assert refused.value.error_code == code
    markers.down.clear()
    assert await settled(c, "t") is TxnState.COMPLETE_COMMIT


async def test_a_leaders_verification_is_answered_as_kafka_4_answers_it(
    make: Make, markers: LogMarkers,
) -> None:
    c = make()
    pid, epoch = await c.requests.init_producer_id("t", 60_000, -1, -1)
    other = TopicPartition("orders", 1)

    def verify(producer_id: int = pid, producer_epoch: int = epoch,
               transactional_id: str = "t") -> dict[TopicPartition, ErrorCode]:
        try:
            return c.requests.verify_partitions(transactional_id, producer_id,
                                                producer_epoch, {TP, other})
        except TxnError as exc:
            return dict.fromkeys((TP, other), exc.error_code)

    abortable = ErrorCode.TRANSACTION_ABORTABLE
    assert verify() == {TP: abortable, other: abortable}  # Empty: no transaction yet
    await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    assert verify() == {TP: ErrorCode.NONE, other: abortable}
    assert set(verify(pid + 1).values()) == {ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert set(verify(pid, epoch + 1).values()) == {ErrorCode.PRODUCER_FENCED}
    assert set(verify(transactional_id="").values()) == {ErrorCode.INVALID_REQUEST}
    markers.down.add(TP)  # the commit stays prepared
    await c.requests.end_txn("t", pid, epoch, commit=True)
    assert set(verify().values()) == {ErrorCode.CONCURRENT_TRANSACTIONS}
    markers.down.clear()
    assert await settled(c, "t") is TxnState.COMPLETE_COMMIT
    assert verify() == {TP: abortable, other: abortable}  # a late write of that transaction


async def test_a_new_instance_aborts_the_open_transaction_and_fences_the_old_one(
    make: Make, markers: LogMarkers,
) -> None:
    c = make()
    pid, epoch = await c.requests.init_producer_id("t", 60_000, -1, -1)
    await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    markers.log(TP).append_as_leader(transactional_batch(pid, epoch), 0)
    with pytest.raises(TxnError) as busy:
        await c.requests.init_producer_id("t", 60_000, -1, -1)
    assert busy.value.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await settled(c, "t") is TxnState.COMPLETE_ABORT
    assert await c.requests.init_producer_id("t", 60_000, -1, -1) == (pid, epoch + 2)
    assert markers.log(TP).aborted_transactions(0, 10)[0].producer_id == pid
    with pytest.raises(TxnError) as fenced:
        await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    assert fenced.value.error_code == ErrorCode.PRODUCER_FENCED
    with pytest.raises(LogError):  # and the partition refuses its late writes
        markers.log(TP).append_as_leader(transactional_batch(pid, epoch), 0)


async def test_a_transaction_past_its_timeout_is_aborted_at_a_new_epoch(
    make: Make, clock: FakeClock,
) -> None:
    c = make(abort_interval_ms=1000)
    pid, epoch = await c.requests.init_producer_id("t", 5000, -1, -1)
    await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    clock.advance(4)
    c.tick()
    assert c.txns["t"].record.state is TxnState.ONGOING
    clock.advance(2)
    c.tick()
    assert await settled(c, "t") is TxnState.COMPLETE_ABORT
    assert c.txns["t"].record.producer_epoch == epoch + 1


async def test_a_new_coordinator_finishes_a_decided_transaction(
    make: Make, markers: LogMarkers, store: MemoryTransactionStateTopic,
) -> None:
    old = make()
    pid, epoch = await old.requests.init_producer_id("t", 60_000, -1, -1)
    await old.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    markers.down.add(TP)  # the partition's leader is away: the markers cannot be written
    await old.requests.end_txn("t", pid, epoch, commit=True)
    await old.stop()  # the coordinator dies with PrepareCommit in the log
    markers.down.clear()
    store.epochs = dict.fromkeys(store.epochs, 1)  # leadership moved: a new coordinator epoch

    new = make()
    assert new.txns["t"].record.state is TxnState.PREPARE_COMMIT
    assert await settled(new, "t") is TxnState.COMPLETE_COMMIT
    assert markers.log(TP).producer_state()[pid].coordinator_epoch == 1


async def test_requests_are_checked_as_kafka_checks_them(make: Make) -> None:
    c = make(max_timeout_ms=10_000)

    async def code(request: Awaitable[object]) -> ErrorCode:
        with pytest.raises(TxnError) as refused:
            await request
        return refused.value.error_code

    assert await code(c.requests.init_producer_id("t", 20_000, -1, -1)) == (
        ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    pid, epoch = await c.requests.init_producer_id("t", 10_000, -1, -1)
    assert await code(c.requests.add_partitions("t", pid + 1, epoch, {TP}, {TP})) == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    assert await code(c.requests.end_txn("t", pid, epoch, commit=True)) == (
        ErrorCode.INVALID_TXN_STATE)
    missing = TopicPartition("gone", 0)
    assert await c.requests.add_partitions("t", pid, epoch, {TP, missing}, {TP}) == {
        TP: ErrorCode.OPERATION_NOT_ATTEMPTED, missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert c.txns["t"].record.state is TxnState.EMPTY


async def test_a_producer_naming_its_epoch_gets_the_next_and_its_retry_the_same(
    make: Make,
) -> None:
    c = make()
    pid, epoch = await c.requests.init_producer_id("t", 60_000, -1, -1)
    assert await c.requests.init_producer_id("t", 60_000, pid, epoch) == (pid, epoch + 1)
    # The answer was lost and the producer asks again: the same epoch, not another bump.
    assert await c.requests.init_producer_id("t", 60_000, pid, epoch) == (pid, epoch + 1)
    assert await c.requests.init_producer_id("t", 60_000, pid, epoch + 1) == (pid, epoch + 2)
    for stale in ((pid, epoch), (pid + 1, epoch + 2)):
        with pytest.raises(TxnError) as fenced:
            await c.requests.init_producer_id("t", 60_000, *stale)
        assert fenced.value.error_code == ErrorCode.PRODUCER_FENCED


async def test_a_state_write_that_loses_leadership_answers_not_coordinator(
    make: Make, store: MemoryTransactionStateTopic,
) -> None:
    """Kafka's mapping: the client looks the coordinator up again and retries its EndTxn
    there, instead of aborting a transaction whose PrepareCommit may still complete."""
    c = make()
    pid, epoch = await c.requests.init_producer_id("t", 60_000, -1, -1)
    await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    store.replicate_on_append = False
    ending = asyncio.ensure_future(c.requests.end_txn("t", pid, epoch, commit=True))
    await asyncio.sleep(0.01)
    await store.fail_replication(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    with pytest.raises(TxnError) as refused:
        await ending
    assert refused.value.error_code == ErrorCode.NOT_COORDINATOR


async def load_error(request: Awaitable[object] | Callable[[], object]) -> ErrorCode:
    with pytest.raises(TxnError) as refused:
        if callable(request):
            request()
        else:
            await request
    return refused.value.error_code


async def test_requests_answer_load_in_progress_until_the_partition_is_loaded(
    make: Make, store: MemoryTransactionStateTopic,
) -> None:
    old = make()
    epochs = {f"t{n}": (await old.requests.init_producer_id(f"t{n}", 60_000, -1, -1))
              for n in range(40)}
    pid, epoch = epochs["t0"]
    await old.requests.add_partitions("t0", pid, epoch, {TP}, {TP})
    await old.stop()
    store.epochs = dict.fromkeys(store.epochs, 1)  # a new leader of every partition

    new = make(load_slice_records=2)  # about ten records a partition: several slices each
    loading = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert await load_error(new.requests.init_producer_id("t1", 60_000, -1, -1)) == loading
    assert await load_error(new.requests.add_partitions("t0", pid, epoch, {TP}, {TP})) == (
        loading)
    assert await load_error(new.requests.end_txn("t0", pid, epoch, commit=True)) == loading
    assert await load_error(lambda: new.metadata("t0")) == loading  # DescribeTransactions
    assert await load_error(new.list_transactions) == loading
    assert new.txns == {}  # nothing half-loaded is ever visible

    await new.wait_loaded()
    assert {m.transactional_id for m in new.list_transactions()} == set(epochs)
    assert new.txns["t0"].record.state is TxnState.ONGOING
    await new.requests.end_txn("t0", pid, epoch, commit=True)
    assert await settled(new, "t0") is TxnState.COMPLETE_COMMIT
    assert await new.requests.init_producer_id("t1", 60_000, -1, -1) == (
        epochs["t1"][0], epochs["t1"][1] + 1)


async def test_a_leadership_change_mid_load_loads_again_in_the_new_epoch(
    make: Make, store: MemoryTransactionStateTopic, markers: LogMarkers,
) -> None:
    old = make()
    for n in range(20):
        await old.requests.init_producer_id(f"t{n}", 60_000, -1, -1)
    pid, epoch = await old.requests.init_producer_id("t", 60_000, -1, -1)
    await old.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    markers.down.add(TP)  # its markers cannot be written before the coordinator dies
    await old.requests.end_txn("t", pid, epoch, commit=True)
    await old.stop()
    markers.down.clear()

    partition = old.partition_of("t")
    new = make(load_slice_records=1)
    assert await load_error(lambda: new.metadata("t")) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    store.led.discard(partition)
    assert await load_error(lambda: new.metadata("t")) == ErrorCode.NOT_COORDINATOR
    await asyncio.sleep(0)
    assert "t" not in new.txns  # the cancelled load installed nothing
    store.led.add(partition)
    store.epochs[partition] = 2
    new.refresh_partitions()
    await new.wait_loaded()
    assert await settled(new, "t") is TxnState.COMPLETE_COMMIT  # finished where the old one stopped
    assert markers.log(TP).producer_state()[pid].coordinator_epoch == 2


async def removed(c: TransactionCoordinator, transactional_id: str) -> bool:
    """Whether the id left memory once its tombstone write has run its course."""
    for _ in range(200):
        meta = c.txns.get(transactional_id)
        if meta is None or not meta.pending:
            break
        await asyncio.sleep(0.01)
    return transactional_id not in c.txns


async def test_ended_ids_expire_with_a_tombstone_and_stay_gone_after_a_reload(
    make: Make, markers: LogMarkers, store: MemoryTransactionStateTopic, clock: FakeClock,
) -> None:
    c = make(id_expiration_ms=60_000, remove_expired_interval_ms=1000)
    pid, epoch = await c.requests.init_producer_id("done", 900_000, -1, -1)
    await c.requests.add_partitions("done", pid, epoch, {TP}, {TP})
    await c.requests.end_txn("done", pid, epoch, commit=True)
    assert await settled(c, "done") is TxnState.COMPLETE_COMMIT
    await c.requests.init_producer_id("empty", 900_000, -1, -1)
    open_pid, open_epoch = await c.requests.init_producer_id("open", 900_000, -1, -1)
    await c.requests.add_partitions("open", open_pid, open_epoch, {TP}, {TP})
    stuck = TopicPartition("orders", 2)
    markers.down.add(stuck)  # its commit stays prepared
    stuck_pid, stuck_epoch = await c.requests.init_producer_id("prepared", 900_000, -1, -1)
    await c.requests.add_partitions("prepared", stuck_pid, stuck_epoch, {stuck}, {stuck})
    await c.requests.end_txn("prepared", stuck_pid, stuck_epoch, commit=True)

    clock.advance(59)
    c.tick()
    assert not await removed(c, "done") and not await removed(c, "empty")
    clock.advance(1)  # their last update is transactional.id.expiration.ms old
    c.tick()
    assert await removed(c, "done") and await removed(c, "empty")
    assert c.metadata("done") is None  # DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND
    assert {m.transactional_id for m in c.list_transactions()} == {"open", "prepared"}
    assert ("done", None) in list(store.replay_states(c.partition_of("done")))

    await c.stop()
    store.epochs = dict.fromkeys(store.epochs, 1)  # another coordinator replays the log
    new = make()
    await new.wait_loaded()
    assert set(new.txns) == {"open", "prepared"}
    new_pid, new_epoch = await new.requests.init_producer_id("done", 60_000, -1, -1)
    assert (new_pid != pid, new_epoch) == (True, 0)  # a fresh producer id, as for a new id


async def test_an_id_being_removed_waits_for_its_tombstone_and_stays_if_the_write_fails(
    make: Make, store: MemoryTransactionStateTopic, clock: FakeClock,
) -> None:
    c = make(id_expiration_ms=60_000, remove_expired_interval_ms=1000)
    await c.requests.init_producer_id("t", 60_000, -1, -1)
    store.replicate_on_append = False
    clock.advance(60)
    c.tick()
    # Kafka's pending Dead: the id's requests wait (clients retry) until the write is done.
    assert await load_error(c.requests.init_producer_id("t", 60_000, -1, -1)) == (
        ErrorCode.CONCURRENT_TRANSACTIONS)
    await store.fail_replication(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert not await removed(c, "t")
    assert c.txns["t"].record.state is TxnState.EMPTY
    store.replicate_on_append = True  # the replicas are back: the next sweep removes it
    clock.advance(1)
    c.tick()
    assert await removed(c, "t")


async def test_a_producer_naming_an_expired_id_and_epoch_gets_a_fresh_producer_id(
    make: Make, clock: FakeClock,
) -> None:
    """KIP-360 after expiry: Kafka answers a producer id and epoch for an id whose state it
    just created with a new producer id rather than PRODUCER_FENCED, so a producer that
    was idle past transactional.id.expiration.ms carries on with a new producer id."""
    c = make(id_expiration_ms=60_000, remove_expired_interval_ms=1000)
    pid, epoch = await c.requests.init_producer_id("t", 60_000, -1, -1)
    clock.advance(60)
    c.tick()
    assert await removed(c, "t")
    with pytest.raises(TxnError) as unknown:  # its next transaction
        await c.requests.add_partitions("t", pid, epoch, {TP}, {TP})
    assert unknown.value.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    new_pid, new_epoch = await c.requests.init_producer_id("t", 60_000, pid, epoch)
    assert (new_pid != pid, new_epoch) == (True, 0)
    await c.requests.add_partitions("t", new_pid, new_epoch, {TP}, {TP})
