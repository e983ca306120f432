"""Many partitions' offsets in one ListOffsets per leader, over our own connections.

librdkafka's admin ListOffsets (confluent-kafka 2.16) cost the caller's process about
0.45 s of CPU for 10,000 partitions (0.18 s in the call that hands the query over, 0.23 s
while the answer was awaited: librdkafka's threads, and the answer made into an object
per partition) and 1 s of wall time, while the built-in broker answered the same request
in 0.07 s of its own CPU. The same request and answer through kafka-python's codec cost
0.06 s of CPU and 0.17 s of wall (bench/README.md, collector_db_bench.py, fourth round).
The request is Kafka's own: one ListOffsets per leader (the caller says which broker
leads each partition), all in flight before any answer is read, as librdkafka sends it.

`OffsetReader` shares GroupReader's connections code but not its connections: the
collector reads the groups on another thread while the offsets are read, and a connection
carries one caller's requests at a time.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from .errors import ClusterRequestError, ClusterUnavailable
from .group_reads import GroupReader
from .metadata import Broker, ClusterMetadata, TopicPartition
from .offsets import ListedOffset, ListOffsetsResult, OffsetKind, OffsetQuery
from .wire import Connection, request_error

# v7 (Kafka 3.0, KIP-734) is the first to answer the max-timestamp query; ClusterClient sends
# those through librdkafka, whatever the broker serves. From v4 a partition's answer has its
# leader epoch; the broker's current epoch is not checked (-1), as librdkafka's admin call.
LIST_OFFSETS = 7
OLDEST_SERVED = 1  # v0 answers a list of offsets per partition, not one
READ_UNCOMMITTED = 0  # librdkafka's admin default: the high watermark, not the stable offset
NO_EPOCH = -1
# One partition's answer: (error code, offset, timestamp, leader epoch; -1 when none).
Answer = tuple[int, int, int, int]
TIMESTAMPS = {OffsetKind.LATEST: -1, OffsetKind.EARLIEST: -2, OffsetKind.MAX_TIMESTAMP: -3}
# Queries whose answer may be -1: no record at or after that time (an empty partition).
BY_TIME = (OffsetKind.TIMESTAMP, OffsetKind.MAX_TIMESTAMP)
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, OFFSET_NOT_AVAILABLE = 3, 5, 78
# The leader the metadata named is not (any more): NOT_LEADER_OR_FOLLOWER, FENCED_ and
# UNKNOWN_LEADER_EPOCH, and the two a broker that has yet to learn of a partition answers.
LEADER_MOVED = frozenset({UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, 6, 74, 75})

_Topic = ListOffsetsRequest.ListOffsetsTopic
_Partition = _Topic.ListOffsetsPartition


class OffsetReader(GroupReader):
    """ListOffsets to each leader at once; thread-safe (one read at a time)."""

    def list_offsets(self, by_leader: Mapping[Broker, Mapping[TopicPartition, int]]
                     ) -> tuple[dict[TopicPartition, Answer], dict[Broker, ClusterUnavailable]]:
        """Each leader's partitions asked for the offset at Kafka's timestamp for each
        (-1 latest, -2 earliest, -3 max timestamp, else ms); the answers, and the leaders
        that did not answer (connection refused or lost, or no answer within the timeout)."""
        with self._lock:
            deadline = time.monotonic() + self.timeout
            sent: list[tuple[Connection, Broker]] = []
            failed: dict[Broker, ClusterUnavailable] = {}
            for broker, wanted in by_leader.items():
                try:
                    connection = self._connection(broker.host, broker.port)
                    connection.send(_request(wanted), ListOffsetsResponse,
                                    self._served(connection))
                    sent.append((connection, broker))
                except ClusterUnavailable as exc:
                    self._drop_address(broker.host, broker.port)
                    failed[broker] = exc
                except BaseException:  # Unbatched: the answers sent for are never read
                    for unread, _ in sent:
                        self._drop(unread)
                    raise
            found: dict[TopicPartition, Answer] = {}
            for i, (connection, broker) in enumerate(sent):
                try:
                    answer = self._receive(connection, deadline)
                except ClusterUnavailable as exc:
                    failed[broker] = exc
                    continue
                except BaseException:  # answers left unread would meet the next request
                    for unread, _ in sent[i + 1:]:
                        self._drop(unread)
                    raise
                for t in answer.topics:
                    name = t.name
                    for p in t.partitions:
                        found[TopicPartition(name, p.partition_index)] = (
                            p.error_code, p.offset, p.timestamp, p.leader_epoch)
            return found, failed

    def _served(self, connection: Connection) -> int:
        low, high = connection.versions.get(ListOffsetsRequest.API_KEY, (0, -1))
        version = min(LIST_OFFSETS, high)
        if version < max(low, OLDEST_SERVED):
            return self._version(connection, ListOffsetsRequest, LIST_OFFSETS)  # Unbatched
        return version


def _request(wanted: Mapping[TopicPartition, int]) -> ListOffsetsRequest:
    topics: dict[str, list[Any]] = {}
    for (topic, partition), timestamp in wanted.items():
        partitions = topics.get(topic)
        if partitions is None:
            partitions = topics[topic] = []
        partitions.append(_Partition(partition_index=partition,
                                     current_leader_epoch=NO_EPOCH, timestamp=timestamp))
    return ListOffsetsRequest(replica_id=-1, isolation_level=READ_UNCOMMITTED,
                              topics=[_Topic(name=name, partitions=partitions)
                                      for name, partitions in topics.items()])


# --- from queries to requests, and from answers to a ListOffsetsResult ------------------
def timestamp_of(query: OffsetQuery) -> int:
    """Kafka's ListOffsets timestamp for a query."""
    if query.kind is OffsetKind.TIMESTAMP:
        return int(query.timestamp_ms or 0)
    return TIMESTAMPS[query.kind]


Unled = dict[TopicPartition, ClusterRequestError]


def by_leader(metadata: ClusterMetadata, wanted: Iterable[TopicPartition]
              ) -> tuple[dict[Broker, list[TopicPartition]], Unled]:
    """The partitions by the broker the metadata says leads them, and those it gives no
    leader (an unknown topic or partition, or one offline), each with that error."""
    brokers = {b.node_id: b for b in metadata.brokers}
    leaders = {(p.topic, p.partition): p.leader for p in metadata.partitions}
    led: dict[Broker, list[TopicPartition]] = {}
    unled: Unled = {}
    for tp in wanted:
        leader = leaders.get(tp)
        broker = brokers.get(leader) if leader is not None else None
        if broker is None:
            unled[tp] = partition_error(
                UNKNOWN_TOPIC_OR_PARTITION if leader is None else LEADER_NOT_AVAILABLE, tp)
            continue
        partitions = led.get(broker)
        if partitions is None:
            partitions = led[broker] = []
        partitions.append(tp)
    return led, unled


def settle(found: ListOffsetsResult, queries: Mapping[TopicPartition, OffsetQuery],
           answers: Mapping[TopicPartition, Answer]) -> dict[TopicPartition, ClusterRequestError]:
    """The answers into `found`: an offset, or the partition's error; those whose leader
    said it is not theirs (any more) are returned instead, to be asked again."""
    again: dict[TopicPartition, ClusterRequestError] = {}
    offsets, errors = found.offsets, found.errors
    for tp, query in queries.items():
        answer = answers.get(tp)
        if answer is None:  # a broker answers every partition asked; this one did not
            again[tp] = no_answer(tp, "its leader's answer left it out")
            continue
        code, offset, timestamp, epoch = answer
        if code:
            problem = partition_error(code, tp)
            if code in LEADER_MOVED:
                again[tp] = problem
            else:
                errors[tp] = problem
        elif offset < 0 and not (offset == -1 and query.kind in BY_TIME):
            errors[tp] = no_answer(tp, f"its leader gave no {query.kind} offset (got {offset})")
        else:
            offsets[tp] = ListedOffset(offset, timestamp, epoch if epoch >= 0 else None)
    return again


def partition_error(code: int, tp: TopicPartition) -> ClusterRequestError:
    """A partition's Kafka error code as the value librdkafka's path gives (its names)."""
    problem = request_error(code, None, tp.topic)
    return ClusterRequestError(code, KafkaError(code).name(), problem.message, tp.topic,
                               tp.partition, retriable=isinstance(problem, ClusterUnavailable)
                               or problem.retriable)


def no_answer(tp: TopicPartition, why: str) -> ClusterRequestError:
    """No offset read for `tp`: OFFSET_NOT_AVAILABLE, retriable, as librdkafka's path says
    of a partition whose leader it could not reach."""
    return ClusterRequestError(OFFSET_NOT_AVAILABLE, "OFFSET_NOT_AVAILABLE",
                               f"no offset for {tp.topic}-{tp.partition}: {why}", tp.topic,
                               tp.partition, retriable=True)
