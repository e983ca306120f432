"""Where the coordinator keeps its state: the compacted `__consumer_offsets` topic.

`BrokerOffsetsTopic` is the real one, on this broker's partition logs. `MemoryOffsetsTopic`
keeps the same record batches in lists, so the state machine can be tested without a log;
its replication is driven by the test. Both hand back `OffsetsRecord`s in log order for the
coordinator to replay.

A write has two steps, as an acks=all produce does: `append` puts it in the leader's log at
once (so writes keep the order they were made in) and returns the offset after it;
`wait_replicated` returns when the high watermark has passed that offset, that is, when
every in-sync replica has it, and raises GroupError when that cannot happen. Its code is
the partition's or the log's error as Kafka's coordinators answer it (`coordinator_error`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Protocol

from brokercore.config import BrokerConfig
from brokercore.controller.controller import Controller, NewTopic
from brokercore.log import LogError
from brokercore.log.transactions import build_control_batch
from brokercore.log.verification import SENTINEL, VerificationGuard
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import PartitionError
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.topic_partition import TopicPartition

from .records import (
    KeyValue,
    OffsetsRecord,
    StoredBatch,
    TxnMarker,
    build_batch,
    decode_record,
    read_batches,
)
from .state import GroupError

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_READ_CHUNK = 1 << 20
# A transactional write's producer: (producer id, epoch).
Producer = tuple[int, int] | None

# What Kafka's group and transaction coordinators answer for a failed write to their log
# (GroupCoordinatorService's exception normalisation, TransactionStateManager's append
# callback): the leadership or the log dir is gone here, so the coordinator has moved
# (clients look it up again); the partition cannot take the write now, so it is not
# available (clients retry); a batch too large is the coordinator's own fault. Any other
# error (INVALID_PRODUCER_EPOCH, say) is answered as it is.
_COORDINATOR_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def coordinator_error(code: ErrorCode) -> ErrorCode:
    return _COORDINATOR_ERRORS.get(code, code)


class OffsetsStore(Protocol):
    @property
    def num_partitions(self) -> int: ...

    def leader_epoch(self, partition: int) -> int | None:
        """This broker's leader epoch of the partition; None if it does not lead it."""

    def leader(self, partition: int) -> int:
        """The node id leading the partition, -1 if none."""

    async def ensure_exists(self) -> None:
        """Create the topic on first use; GroupError if that fails."""

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int,
               producer: Producer = None,
               verification_guard: VerificationGuard | None = None) -> int:
        """Append to the leader's log and return the offset after the records, or raise
        GroupError (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE). With a producer, the
        records are a transactional batch of that producer (TxnOffsetCommit), which with a
        `verification_guard` must continue the producer's transaction there or carry the
        guard its verification started with (KIP-890), else INVALID_TXN_STATE."""

    def start_verification(self, partition: int, producer: tuple[int, int]
                           ) -> VerificationGuard:
        """KIP-890 on the group coordinator's partition: the guard a transactional write
        must carry once the transaction coordinator has vouched for it; SENTINEL if the
        producer's transaction is open there already. GroupError if not led here."""

    async def wait_replicated(self, partition: int, offset: int, timeout_ms: int) -> None:
        """Return once the ISR has everything below `offset`, or raise GroupError."""

    def replay(self, partition: int) -> Iterator[OffsetsRecord | TxnMarker]: ...


class MemoryOffsetsTopic:
    """An in-memory `__consumer_offsets` whose partitions this broker all leads.

    Appends replicate at once unless a test sets `replicate_on_append = False`; then
    `replicate()` moves the high watermark and `fail_replication()` fails the waiters.
    """

    def __init__(self, num_partitions: int = 4, node_id: int = 1) -> None:
        self.node_id = node_id
        self._num_partitions = num_partitions
        self.batches: dict[int, list[bytes]] = {p: [] for p in range(num_partitions)}
        self.led: set[int] = set(range(num_partitions))
        self.epochs: dict[int, int] = dict.fromkeys(range(num_partitions), 0)
        self.log_end: dict[int, int] = dict.fromkeys(range(num_partitions), 0)
        self.high_watermark: dict[int, int] = dict.fromkeys(range(num_partitions), 0)
        self.replicate_on_append = True
        self._moved = asyncio.Condition()
        self._failure: GroupError | None = None

    @property
    def num_partitions(self) -> int:
        return self._num_partitions

    def leader_epoch(self, partition: int) -> int | None:
        return self.epochs[partition] if partition in self.led else None

    def leader(self, partition: int) -> int:
        return self.node_id if partition in self.led else -1

    async def ensure_exists(self) -> None:
        pass

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int,
               producer: Producer = None,
               verification_guard: VerificationGuard | None = None) -> int:
        if partition not in self.led:
            raise GroupError(ErrorCode.NOT_COORDINATOR)
        self.batches[partition].append(build_batch(records, timestamp_ms, producer))
        self.log_end[partition] += len(records)
        if self.replicate_on_append:
            self.high_watermark[partition] = self.log_end[partition]
        return self.log_end[partition]

    def start_verification(self, partition: int, producer: tuple[int, int]
                           ) -> VerificationGuard:
        if partition not in self.led:
            raise GroupError(ErrorCode.NOT_COORDINATOR)
        return SENTINEL  # no producer state in memory: nothing to verify

    async def wait_replicated(self, partition: int, offset: int, timeout_ms: int) -> None:
        async with self._moved:
            await self._moved.wait_for(
                lambda: self._failure is not None or self.high_watermark[partition] >= offset)
            if self.high_watermark[partition] < offset:
                assert self._failure is not None
                raise self._failure

    async def replicate(self) -> None:
        """The followers caught up: the high watermark reaches the log end everywhere."""
        async with self._moved:
            self.high_watermark.update(self.log_end)
            self._moved.notify_all()

    async def fail_replication(self, code: ErrorCode) -> None:
        async with self._moved:
            self._failure = GroupError(code)
            self._moved.notify_all()

    def append_marker(self, partition: int, producer: tuple[int, int], commit: bool) -> int:
        """A transaction marker, as the partition leader writes one (WriteTxnMarkers)."""
        marker = bytearray(build_control_batch(*producer, commit, 0, 0))
        marker[0:8] = self.log_end[partition].to_bytes(8, "big")
        self.batches[partition].append(bytes(marker))
        self.log_end[partition] += 1
        if self.replicate_on_append:
            self.high_watermark[partition] = self.log_end[partition]
        return self.log_end[partition]

    def replay(self, partition: int) -> Iterator[OffsetsRecord | TxnMarker]:
        for batch in self.batches[partition]:
            for stored in read_batches(batch):
                yield from _decode_all(stored)


class BrokerOffsetsTopic:
    """`__consumer_offsets` on this broker's logs, created through the controller.

    The transaction coordinator keeps `__transaction_state` the same way: a subclass names
    its topic, its configs (`config_prefix`) and what it replays.
    """

    topic = OFFSETS_TOPIC
    config_prefix = "offsets.topic"

    def __init__(
        self, replicas: ReplicaManager, controller: Controller, config: BrokerConfig
    ) -> None:
        self.replicas = replicas
        self.controller = controller
        self.config = config
        self.image = controller.image
        self.node_id = config.node_id

    @property
    def exists(self) -> bool:
        return self.topic in self.image.topics

    @property
    def num_partitions(self) -> int:
        topic = self.image.topics.get(self.topic)
        if topic is not None:
            return len(topic.partitions)
        return self.config.get_int(f"{self.config_prefix}.num.partitions")

    async def ensure_exists(self) -> None:
        if self.exists:
            return
        live = sum(1 for b in self.image.brokers.values() if not b.fenced)
        rf = max(1, min(self.config.get_int(f"{self.config_prefix}.replication.factor"), live))
        topic = NewTopic(self.topic, self.num_partitions, rf, configs=self.topic_configs(rf))
        [(_, error)] = await self.controller.create_topics([topic])
        if error is not None and error.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("node %d: cannot create %s: %s", self.node_id, self.topic,
                        error.message)
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, error.message)
        # Its logs here open in the background; the group that asked may be led here.
        await self.replicas.settled(
            within=self.config.get_int("controller.quorum.request.timeout.ms") / 1000)

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return {"cleanup.policy": "compact",
                "segment.bytes": str(self.config.get_int(f"{self.config_prefix}.segment.bytes"))}

    def leader(self, partition: int) -> int:
        topic = self.image.topics.get(self.topic)
        if topic is None or partition not in topic.partitions:
            return -1
        return int(topic.partitions[partition].leader)

    def leader_epoch(self, partition: int) -> int | None:
        try:
            leader = self.replicas.leader_partition(
                TopicPartition(self.topic, partition))
        except PartitionError:
            return None
        return leader.leader_epoch

    def append(self, partition: int, records: list[KeyValue], timestamp_ms: int,
               producer: Producer = None,
               verification_guard: VerificationGuard | None = None) -> int:
        tp = TopicPartition(self.topic, partition)
        try:
            leader = self.replicas.leader_partition(tp)
            leader.check_min_insync_replicas()  # Kafka's coordinators write with acks=all
            batch = build_batch(records, timestamp_ms, producer)
            return leader.append_as_leader(batch, verification_guard).last_offset + 1
        except (PartitionError, LogError) as exc:  # the write did not happen
            if isinstance(exc, LogError):
                log.warning("node %d: cannot write to %s: %r", self.node_id, tp, exc)
            raise GroupError(coordinator_error(exc.error_code), f"{tp}: {exc}") from None

    def start_verification(self, partition: int, producer: tuple[int, int]
                           ) -> VerificationGuard:
        tp = TopicPartition(self.topic, partition)
        try:
            leader = self.replicas.leader_partition(tp)
        except PartitionError as exc:
            raise GroupError(coordinator_error(exc.error_code), f"{tp}: {exc}") from None
        producer_id, producer_epoch = producer
        # A coordinator's write carries no sequence.
        return leader.maybe_start_transaction_verification(producer_id, -1, producer_epoch)

    async def wait_replicated(self, partition: int, offset: int, timeout_ms: int) -> None:
        tp = TopicPartition(self.topic, partition)
        try:
            leader = self.replicas.leader_partition(tp)
        except PartitionError as exc:
            raise GroupError(coordinator_error(exc.error_code), f"{tp}: {exc}") from None
        code = await leader.wait_until_replicated(offset - 1, timeout_ms / 1000)
        if code != ErrorCode.NONE:
            raise GroupError(coordinator_error(code),
                             f"{tp}: {code.name} waiting for offset {offset - 1}")

    def replay(self, partition: int) -> Iterator[OffsetsRecord | TxnMarker]:
        for stored in self.read_batches(partition):
            yield from _decode_all(stored)

    def read_batches(self, partition: int) -> Iterator[StoredBatch]:
        """Every batch of the partition's log, from the log start."""
        tp = TopicPartition(self.topic, partition)
        plog = self.replicas.partitions[tp].log
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            data = plog.read(offset, _READ_CHUNK, min_one_batch=True)
            next_offset = offset
            for stored in read_batches(bytes(data.records)):
                yield stored
                next_offset = stored.next_offset
            if next_offset <= offset:
                break  # an empty read: nothing more to replay
            offset = next_offset


def _decode_all(stored: StoredBatch) -> Iterator[OffsetsRecord | TxnMarker]:
    if stored.commit is not None:
        yield TxnMarker(stored.producer_id, stored.producer_epoch, stored.commit,
                        stored.next_offset - 1)
    for key, value in stored.records:
        record = decode_record(key, value, (stored.producer_id, stored.producer_epoch))
        if record is not None:
            yield record
