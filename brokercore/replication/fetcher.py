"""The follower side: one fetcher task per source broker, pulling its partitions' logs.

For each partition it follows, a fetcher first settles where the follower's log agrees with
the leader's (KIP-101/KIP-279): it asks the leader OffsetForLeaderEpoch for the follower's
latest epoch and truncates whatever lies beyond the leader's end of that epoch, repeating
with an older epoch when the leader answers with one the follower never had. Then it
fetches from its log end with Fetch v12 (`replica_id` = own node id), appends what comes
back as it is, and takes the leader's high watermark. Its fetches go through a fetch session
with the leader (`fetch_session.py`, KIP-227): an idle follower's fetch names no partition,
and the leader answers only those with news.

Errors: a connection failure backs every partition off `replica.fetch.backoff.ms`. Per
partition, FENCED_LEADER_EPOCH parks it until metadata gives it a newer epoch (the replica
manager then hands it over afresh); UNKNOWN_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER mean
the leader has not applied that metadata yet, so the partition retries after the back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import (
    FetchRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)

from brokercore.clock import Clock
from brokercore.config import BrokerConfig
from brokercore.controller.image import MetadataImage
from brokercore.log import KafkaStorageError, LogError
from brokercore.log.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from brokercore.protocol.errors import ErrorCode
from brokercore.security.connection import inter_broker_security
from brokercore.topic_partition import TopicPartition

from .connection import BrokerConnection, ConnectionFailed
from .fetch_session import FollowerFetchSession, PartitionFetch
from .partition import Partition

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 4
EARLIEST = -2

FetchTopic = FetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition
ForgottenTopic = FetchRequest.ForgottenTopic
EpochTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
EpochPartition = EpochTopic.OffsetForLeaderPartition
ListTopic = ListOffsetsRequest.ListOffsetsTopic
ListPartition = ListTopic.ListOffsetsPartition


@dataclass
class FetchState:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    parked: bool = False  # fenced: waits for newer metadata
    delayed_until: float = 0.0  # monotonic seconds

    def ready(self, now: float) -> bool:
        return not self.parked and now >= self.delayed_until


class ReplicaFetcher:
    """Pulls the partitions this broker follows from one source broker. The replica manager
    adds and removes them; the image gives the source's address."""

    def __init__(self, source_id: int, node_id: int, config: BrokerConfig, image: MetadataImage,
                 clock: Clock) -> None:
        self.source_id = source_id
        self.node_id = node_id
        self.config = config
        self.image = image
        self.clock = clock
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._connection: BrokerConnection | None = None
        self._session = FollowerFetchSession()
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self.backoff = config.get_int("replica.fetch.backoff.ms") / 1000
        self.timeout = config.get_int("replica.socket.timeout.ms") / 1000

    # -- membership (called synchronously by the replica manager) ---------------------------
    def add(self, partition: Partition) -> None:
        self.partitions[partition.tp] = FetchState(partition, partition.leader_epoch)
        self._wakeup.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.source_id}")

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._wakeup.set()

    def reconnect(self) -> None:
        """The source broker registered a new endpoint (or came back): start over."""
        self._close()
        self._wakeup.set()

    async def stop(self) -> None:
        self.partitions.clear()
        self._close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._session.reset()  # the last request's fate is unknown

    # -- the loop ---------------------------------------------------------------------------
    async def _run(self) -> None:
        while self.partitions:
            now = self.clock.monotonic()
            ready = [s for s in self.partitions.values() if s.ready(now)]
            if not ready:
                await self._idle(now)
                continue
            try:
                connection = await self._connect()
                truncating = [s for s in ready if s.truncating]
                if truncating:
                    await self._truncate(connection, truncating)
                else:
                    await self._fetch(connection, ready)
            except ConnectionFailed as exc:
                log.info("node %d: fetching from broker %d failed, backing off: %s",
                         self.node_id, self.source_id, exc)
                self._close()
                self._delay(list(self.partitions.values()))
            except KafkaStorageError as exc:
                # A log dir failed under a truncation: the replica manager takes its
                # replicas offline (and out of this fetcher) before the next round.
                log.error("node %d: %s", self.node_id, exc)
                await asyncio.sleep(0)
        self._close()

    async def _idle(self, now: float) -> None:
        delays = [s.delayed_until - now for s in self.partitions.values() if not s.parked]
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), min(delays, default=self.backoff))

    async def _connect(self) -> BrokerConnection:
        if self._connection is None:
            broker = self.image.brokers.get(self.source_id)
            if broker is None:
                raise ConnectionFailed(f"broker {self.source_id} is not registered")
            self._connection = await BrokerConnection.open(
                broker.host, broker.port, f"replica-fetcher-{self.node_id}", self.timeout,
                inter_broker_security(self.config),
            )
        return self._connection

    def _delay(self, states: list[FetchState]) -> None:
        until = self.clock.monotonic() + self.backoff
        for state in states:
            state.delayed_until = until

    def _current(self, state: FetchState) -> bool:
        """Still ours: metadata did not move the partition on while a request was out."""
        tp = state.partition.tp
        return self.partitions.get(tp) is state and state.partition.leader == self.source_id

    def _on_error(self, state: FetchState, code: int) -> None:
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("node %d: %s epoch %d is fenced by leader %d; awaiting metadata",
                     self.node_id, state.partition.tp, state.leader_epoch, self.source_id)
            state.parked = True
        else:
            log.debug("node %d: %s fetch error %s from broker %d", self.node_id,
                      state.partition.tp, ErrorCode(code).name, self.source_id)
            self._delay([state])

    # -- truncation (KIP-101, KIP-279) ------------------------------------------------------
    async def _truncate(self, connection: BrokerConnection, states: list[FetchState]) -> None:
        asking = []
        for state in states:
            if state.partition.log.latest_epoch() is None:
                # No epochs (an empty log): nothing can diverge; KIP-101's fallback is the HW.
                self._finish_truncation(state, state.partition.high_watermark)
            else:
                asking.append(state)
        if not asking:
            return
        topics: dict[str, list[Any]] = {}
        for state in asking:
            topics.setdefault(state.partition.tp.topic, []).append(EpochPartition(
                partition=state.partition.tp.partition, current_leader_epoch=state.leader_epoch,
                leader_epoch=state.partition.log.latest_epoch(),
            ))
        request = OffsetForLeaderEpochRequest(
            replica_id=self.node_id,
            topics=[EpochTopic(topic=name, partitions=parts) for name, parts in topics.items()],
        )
        response = await connection.request(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        answers = {
            TopicPartition(t.topic, p.partition): p for t in response.topics for p in t.partitions
        }
        for state in asking:
            answer = answers.get(state.partition.tp)
            if answer is None or not self._current(state):
                continue
            if answer.error_code != ErrorCode.NONE:
                self._on_error(state, answer.error_code)
                continue
            self._apply_epoch_answer(state, answer.leader_epoch, answer.end_offset)

    def _apply_epoch_answer(self, state: FetchState, leader_epoch: int, end_offset: int) -> None:
        partition = state.partition
        log_end = partition.log_end_offset
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            # The leader knows nothing of our epoch: fall back to our high watermark.
            self._finish_truncation(state, partition.high_watermark)
        elif leader_epoch == UNDEFINED_EPOCH:
            self._finish_truncation(state, min(end_offset, log_end))
        else:
            own_epoch, own_end = partition.log.end_offset_for_epoch(leader_epoch)
            if own_epoch == UNDEFINED_EPOCH:
                self._finish_truncation(state, min(end_offset, log_end))
            elif own_epoch != leader_epoch:
                # We never had the leader's epoch: cut back to the end of our last epoch
                # before it and ask again about that one (KIP-279).
                partition.truncate_to(min(own_end, log_end))
                partition.log.truncate_epochs_from_end(own_end)  # so the next ask is older
                self._log_truncation(partition, log_end, "intermediate")
            else:
                self._finish_truncation(state, min(own_end, end_offset, log_end))

    def _finish_truncation(self, state: FetchState, offset: int) -> None:
        partition = state.partition
        log_end = partition.log_end_offset
        partition.truncate_to(offset)
        self._log_truncation(partition, log_end, "final")
        state.truncating = False

    def _log_truncation(self, partition: Partition, old_end: int, kind: str) -> None:
        if partition.log_end_offset < old_end:
            log.info("node %d: %s truncated from %d to %d (%s, leader %d epoch %d)",
                     self.node_id, partition.tp, old_end, partition.log_end_offset, kind,
                     self.source_id, partition.leader_epoch)

    # -- fetching ---------------------------------------------------------------------------
    async def _fetch(self, connection: BrokerConnection, states: list[FetchState]) -> None:
        config = self.config
        max_bytes = config.get_int("replica.fetch.max.bytes")
        wanted = {
            s.partition.tp: PartitionFetch(s.partition.log_end_offset,
                                           s.partition.log_start_offset, s.leader_epoch,
                                           max_bytes)
            for s in states
        }
        session = self._session.build(wanted)
        request = FetchRequest(
            replica_id=self.node_id, max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
            min_bytes=config.get_int("replica.fetch.min.bytes"),
            max_bytes=config.get_int("replica.fetch.response.max.bytes"), isolation_level=0,
            session_id=session.session_id, session_epoch=session.epoch, cluster_id=None,
            rack_id="", topics=_fetch_topics(session.to_send),
            forgotten_topics_data=_forgotten_topics(session.forgotten),
        )
        response = await connection.request(request, FETCH_VERSION)
        if not self._session.answered(response.error_code, response.session_id):
            log.info("node %d: fetch session with broker %d ends: %s; fetching in full",
                     self.node_id, self.source_id, ErrorCode(response.error_code).name)
            return
        by_tp = {s.partition.tp: s for s in states}
        for topic in response.responses:
            for data in topic.partitions:
                found = by_tp.get(TopicPartition(topic.topic, data.partition_index))
                if found is not None and self._current(found):
                    await self._process(connection, found, data)
                    # A partition's first batch of a leader epoch fsyncs its epoch cache:
                    # the first fetch of a new topic does that for every partition, so
                    # the loop must not wait for all of them at once.
                    await asyncio.sleep(0)

    async def _process(self, connection: BrokerConnection, state: FetchState, data: Any) -> None:
        partition = state.partition
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(connection, state)
            return
        if data.error_code != ErrorCode.NONE:
            self._on_error(state, data.error_code)
            return
        try:
            if data.records:
                partition.append_as_follower(data.records)
        except LogError as exc:
            log.warning("node %d: %s cannot append what leader %d sent: %s", self.node_id,
                        partition.tp, self.source_id, exc)
            self._delay([state])
            return
        if data.log_start_offset > partition.log_start_offset:
            partition.log.delete_records_before(
                min(data.log_start_offset, partition.log_end_offset)
            )
        partition.update_follower_high_watermark(data.high_watermark)

    async def _out_of_range(self, connection: BrokerConnection, state: FetchState) -> None:
        """Our log end is outside the leader's log: past its end (diverged, so settle the
        epochs again) or below its start (retention moved on: start over at its start)."""
        partition = state.partition
        request = ListOffsetsRequest(
            replica_id=self.node_id, isolation_level=0,
            topics=[ListTopic(name=partition.tp.topic, partitions=[ListPartition(
                partition_index=partition.tp.partition, current_leader_epoch=state.leader_epoch,
                timestamp=EARLIEST)])],
        )
        response = await connection.request(request, LIST_OFFSETS_VERSION)
        answer = response.topics[0].partitions[0]
        if not self._current(state):
            return
        if answer.error_code != ErrorCode.NONE:
            self._on_error(state, answer.error_code)
        elif answer.offset > partition.log_end_offset:
            log.info("node %d: %s starts over at leader %d's log start %d", self.node_id,
                     partition.tp, self.source_id, answer.offset)
            partition.truncate_fully_and_start_at(answer.offset)
        else:
            state.truncating = True


def _fetch_topics(partitions: dict[TopicPartition, PartitionFetch]) -> list[Any]:
    topics: dict[str, list[Any]] = {}
    for tp, f in partitions.items():
        topics.setdefault(tp.topic, []).append(FetchPartition(
            partition=tp.partition, current_leader_epoch=f.current_leader_epoch,
            fetch_offset=f.fetch_offset, last_fetched_epoch=-1,
            log_start_offset=f.log_start_offset, partition_max_bytes=f.partition_max_bytes,
        ))
    return [FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()]


def _forgotten_topics(partitions: list[TopicPartition]) -> list[Any]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [ForgottenTopic(topic=name, partitions=parts) for name, parts in topics.items()]
