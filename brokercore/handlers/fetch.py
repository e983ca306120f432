"""Fetch (1): whole batches from the log, long-polling for min_bytes up to max_wait_ms.

Consumers (replica_id -1) read below the high watermark; a fetch offset between the high
watermark and the log end is answered empty. A follower (replica_id >= 0, in
`replica_state` from v15) reads up to the log end, and its fetch offset is its log end,
which the leader records (ISR, high watermark). Both only from the leader.

A fetch goes through its session first (`fetch_sessions.py`, KIP-227): the session says
which partitions to read (an incremental fetch reads every partition of its session) and,
once they are read, which of them the answer carries. Reading one partition is `_read`:
the leader and epoch checks (naming the current leader from v16, KIP-951), KIP-320's
diverging epoch (v12+), then the log up to the offset the reader may see (`_read_limit`).
From v13 topics are named by topic id; an id this broker does not know is UNKNOWN_TOPIC_ID.
A read_committed consumer (isolation_level 1) reads below the last stable offset and gets
the aborted transactions of what it read, from the log's transaction indexes.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest, FetchResponse

from brokercore.handlers.fetch_sessions import FetchPosition, PartitionAnswer, SessionKey
from brokercore.handlers.leader_hints import HINTED_ERRORS, current_leader, node_endpoints
from brokercore.handlers.parts import BrokerParts
from brokercore.handlers.registry import serves
from brokercore.log import LogError
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.partition import Partition, PartitionError, wait_for_data
from brokercore.security.acls import AclOperation
from brokercore.topic_partition import TopicPartition

TopicData = FetchResponse.FetchableTopicResponse
PartitionData = TopicData.PartitionData
ZERO_UUID = uuid.UUID(int=0)
TOPIC_IDS_VERSION = 13
# KIP-951 hints come with v16, where `node_endpoints` says how to reach the leader. v12-15
# have the `current_leader` field too (KIP-595 added it for the Raft log), but Kafka leaves
# it empty there for a partition's fetchers: a client at v12 (kafka-python) that took a
# hint would fetch from a node id it may not have in its metadata yet.
LEADER_HINT_VERSION = 16
READ_COMMITTED = 1
AbortedTransaction = PartitionData.AbortedTransaction


@dataclass
class _Read:
    key: SessionKey
    topic: str
    topic_id: uuid.UUID
    index: int
    partition: Partition | None
    error: ErrorCode
    records: Any = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[Any] | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset), KIP-320
    current_leader: tuple[int, int] | None = None  # (leader id, epoch), KIP-951

    def answer(self) -> PartitionAnswer:
        news = (bool(self.records) or self.error != ErrorCode.NONE
                or self.diverging_epoch is not None)
        return PartitionAnswer(self.key, news, self.high_watermark,
                               self.last_stable_offset, self.log_start_offset)


@dataclass(frozen=True)
class _Reader:
    """Who reads, and how: the parts of the request every partition's read depends on."""

    broker: BrokerParts
    replica_id: int
    isolation_level: int
    version: int
    ctx: RequestContext

    @property
    def follower(self) -> bool:
        return self.replica_id >= 0

    def may_read(self, topic: str) -> bool:
        """Kafka's rule: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on
        the topic; a partition refused either way answers TOPIC_AUTHORIZATION_FAILED."""
        authorizer = self.broker.authorizer
        if self.follower:
            return authorizer.authorize_cluster(self.ctx, AclOperation.CLUSTER_ACTION)
        return authorizer.authorize_topic(self.ctx, AclOperation.READ, topic)


@serves(FetchRequest, FetchResponse, min_version=4, max_version=17)
async def handle(broker: BrokerParts, ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    reader = _Reader(broker, _replica_id(request, version), request.isolation_level, version,
                     ctx)
    uses_ids = version >= TOPIC_IDS_VERSION
    context = broker.fetch_sessions.context(
        request.session_id, request.session_epoch, privileged=reader.follower,
        uses_topic_ids=uses_ids, requested=_requested(broker, request, uses_ids),
        forgotten=_forgotten(request.forgotten_topics_data, uses_ids),
    )
    if context.error != ErrorCode.NONE:
        return FetchResponse(throttle_time_ms=0, error_code=context.error,
                             session_id=0, responses=[])
    if reader.follower:
        # Every partition of the session is fetched, sent in this request or not.
        _record_follower_fetch(broker, reader.replica_id, context.positions.values())
    reads = await _read_until_ready(reader, request, list(context.positions.items()))
    session_id, included = context.answer([r.answer() for r in reads])
    return _response(reader, session_id, [r for r in reads if r.key in included])


def _replica_id(request: Any, version: int) -> int:
    """v15 moved the follower's id into `replica_state` (KIP-903)."""
    if version >= 15:
        return int(request.replica_state.replica_id) if request.replica_state else -1
    return int(request.replica_id)


def _requested(
    broker: BrokerParts, request: Any, uses_ids: bool
) -> dict[SessionKey, FetchPosition]:
    requested = {}
    for topic in request.topics:
        topic_id = topic.topic_id if uses_ids else ZERO_UUID
        name = topic.topic if not uses_ids else _topic_name(broker, topic_id) or ""
        for p in topic.partitions:
            key = (str(topic_id) if uses_ids else name, p.partition)
            requested[key] = FetchPosition(
                name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset,
            )
    return requested


def _forgotten(forgotten_topics: Any, uses_ids: bool) -> list[SessionKey]:
    return [(str(t.topic_id) if uses_ids else t.topic, index)
            for t in forgotten_topics or [] for index in t.partitions]


def _topic_name(broker: BrokerParts, topic_id: uuid.UUID) -> str | None:
    topic = broker.image.topics_by_id.get(str(topic_id))
    return topic.name if topic is not None else None


def _record_follower_fetch(broker: BrokerParts, replica_id: int,
                           positions: Any) -> None:
    """Once per request, not per long-poll round: the fetch offset is the follower's log end."""
    manager = broker.replicas
    for p in positions:
        partition = manager.partitions.get(TopicPartition(p.topic, p.partition))
        if (
            partition is not None and partition.is_leader
            and p.current_leader_epoch in (-1, partition.leader_epoch)
            and 0 <= p.fetch_offset <= partition.log_end_offset
        ):
            manager.record_follower_fetch(partition, replica_id, p.fetch_offset,
                                          p.log_start_offset)


async def _read_until_ready(reader: _Reader, request: Any,
                            positions: list[tuple[SessionKey, FetchPosition]]) -> list[_Read]:
    """Read, then read again as data arrives, until min_bytes, news or max_wait_ms."""
    deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
    reads = _read_all(reader, request.max_bytes, positions)
    partitions = [r.partition for r in reads if r.partition is not None]
    while (
        sum(len(r.records or b"") for r in reads) < request.min_bytes
        and partitions
        and not any(r.error or r.diverging_epoch for r in reads)
        and (remaining := deadline - time.monotonic()) > 0
    ):
        await wait_for_data(partitions, remaining)
        reads = _read_all(reader, request.max_bytes, positions)
    if not reader.follower:
        for r in reads:
            if r.partition is not None:
                r.partition.bytes_out += len(r.records or b"")
    return reads


def _read_all(reader: _Reader, max_bytes: int,
              positions: list[tuple[SessionKey, FetchPosition]]) -> list[_Read]:
    budget = max_bytes if max_bytes > 0 else 2**31 - 1
    reads: list[_Read] = []
    nothing_yet = True
    for key, position in positions:
        # KIP-74: the first batch returned may exceed max_bytes, so consumers progress.
        read = _read(reader, key, position, budget, first=nothing_yet)
        budget -= len(read.records or b"")
        nothing_yet = nothing_yet and not read.records
        reads.append(read)
    return reads


def _read(reader: _Reader, key: SessionKey, p: FetchPosition, budget: int,
          first: bool) -> _Read:
    uses_ids = reader.version >= TOPIC_IDS_VERSION
    name = _topic_name(reader.broker, p.topic_id) if uses_ids else p.topic
    result = _Read(key, name or "", p.topic_id, p.partition, None, ErrorCode.NONE)
    if name is None:
        result.error = ErrorCode.UNKNOWN_TOPIC_ID
        return result
    if not reader.may_read(name):
        result.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return result
    try:
        partition = _leader(reader, TopicPartition(name, p.partition), p.current_leader_epoch)
    except PartitionError as exc:
        result.error = exc.error_code
        if exc.error_code in HINTED_ERRORS and reader.version >= LEADER_HINT_VERSION:
            result.current_leader = current_leader(reader.broker.image,
                                                   TopicPartition(name, p.partition))
        return result
    result.partition = partition
    result.high_watermark = partition.high_watermark
    result.last_stable_offset = partition.last_stable_offset
    result.log_start_offset = partition.log_start_offset
    result.aborted_transactions = []
    if reader.version >= 12 and p.last_fetched_epoch >= 0:
        try:
            result.diverging_epoch = _diverging_epoch(partition, p)
        except PartitionError as exc:
            result.error = exc.error_code
            return result
        if result.diverging_epoch is not None:
            return result
    _read_records(reader, partition, p, budget, first, result)
    return result


def _leader(reader: _Reader, tp: TopicPartition, current_leader_epoch: int) -> Partition:
    partition = reader.broker.replicas.leader_partition(tp)
    partition.check_leader_epoch(current_leader_epoch)
    if reader.follower and reader.replica_id not in partition.followers:
        raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return partition


def _diverging_epoch(partition: Partition, p: FetchPosition) -> tuple[int, int] | None:
    """KIP-320/KIP-595: where the fetcher's last fetched epoch ends in this leader's log, if
    the fetcher's log goes past it (it must truncate there before fetching on). As in
    Kafka, OFFSET_OUT_OF_RANGE when this log cannot place that epoch, or the fetch offset
    is below its start."""
    epoch, end_offset = partition.epoch_end(p.last_fetched_epoch)
    if epoch < 0 or end_offset < 0 or p.fetch_offset < partition.log_start_offset:
        raise PartitionError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"cannot place epoch {p.last_fetched_epoch} at {p.fetch_offset}")
    if end_offset < p.fetch_offset or epoch < p.last_fetched_epoch:
        return epoch, end_offset
    return None


def _read_limit(reader: _Reader, partition: Partition) -> int | None:
    """The offset the reader may read below: followers the log end (None), read_committed
    consumers the last stable offset, the others the high watermark."""
    if reader.follower:
        return None
    if reader.isolation_level == READ_COMMITTED:
        return partition.last_stable_offset
    return partition.high_watermark


def _read_records(reader: _Reader, partition: Partition, p: FetchPosition, budget: int,
                  first: bool, result: _Read) -> None:
    max_bytes = min(p.partition_max_bytes, budget)
    if max_bytes <= 0 and not first:
        return
    try:
        data = partition.log.read(p.fetch_offset, max(max_bytes, 0),
                                  max_offset=_read_limit(reader, partition), min_one_batch=first)
    except LogError as exc:
        result.error = exc.error_code
        result.aborted_transactions = None
        return
    result.records = data.records
    if reader.isolation_level == READ_COMMITTED and data.records and not reader.follower:
        # Which transactions aborted in what was read, so the client can skip their records.
        result.aborted_transactions = [
            AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in partition.log.aborted_transactions(p.fetch_offset,
                                                        partition.last_stable_offset)]


def _response(reader: _Reader, session_id: int, reads: list[_Read]) -> Any:
    topics: dict[str, Any] = {}
    for r in reads:
        topic_key = r.key[0]
        if topic_key not in topics:
            topics[topic_key] = TopicData(topic=r.topic, topic_id=r.topic_id, partitions=[])
        topics[topic_key].partitions.append(PartitionData(
            partition_index=r.index, error_code=r.error, high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
            diverging_epoch=_epoch_end_offset(r.diverging_epoch),
            current_leader=_leader_and_epoch(r.current_leader),
            aborted_transactions=r.aborted_transactions,
            preferred_read_replica=-1, records=r.records,
        ))
    leaders = [r.current_leader[0] for r in reads if r.current_leader and r.current_leader[0] >= 0]
    return FetchResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=session_id,
        responses=list(topics.values()),
        node_endpoints=node_endpoints(reader.broker.image, leaders, FetchResponse.NodeEndpoint,
                                      reader.ctx.listener),
    )


def _epoch_end_offset(diverging: tuple[int, int] | None) -> Any:
    if diverging is None:
        return None
    return PartitionData.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])


def _leader_and_epoch(leader: tuple[int, int] | None) -> Any:
    if leader is None:
        return None
    return PartitionData.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
