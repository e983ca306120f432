"""Transaction markers sent to partition leaders (WriteTxnMarkers), as Kafka's coordinator
sends them: one request per leader broker, over the same Kafka protocol clients use, this
broker included. A partition whose leader is unknown or answers an error is tried again by
the coordinator; a partition whose topic was deleted needs no marker.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import Any, Protocol

from kafka.protocol.producer import WriteTxnMarkersRequest

from brokercore.controller.image import MetadataImage
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.connection import BrokerConnection, ConnectionFailed
from brokercore.security.connection import PLAINTEXT_CLIENT, ClientSecurity
from brokercore.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Marker = WriteTxnMarkersRequest.WritableTxnMarker
MarkerTopic = Marker.WritableTxnMarkerTopic
VERSION = 1


class MarkerWriter(Protocol):
    async def write(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> set[TopicPartition]:
        """Have each partition's leader write the marker; the partitions that have it now
        (or no longer exist)."""

    def close(self) -> None: ...


class MarkerChannel:
    def __init__(self, image: MetadataImage, node_id: int, timeout: float,
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.security = security
        self.image = image
        self.node_id = node_id
        self.timeout = timeout
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def write(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> set[TopicPartition]:
        """Send the markers; the partitions that have theirs now (or no longer exist)."""
        done: set[TopicPartition] = set()
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            topic = self.image.topics.get(tp.topic)
            if topic is None or tp.partition not in topic.partitions:
                done.add(tp)  # deleted: nothing left to mark
            elif topic.partitions[tp.partition].leader >= 0:
                by_leader[topic.partitions[tp.partition].leader].append(tp)
        results = await asyncio.gather(*(
            self._send(leader, Marker(
                producer_id=producer_id, producer_epoch=producer_epoch,
                transaction_result=commit, coordinator_epoch=coordinator_epoch,
                topics=_topics(tps)))
            for leader, tps in by_leader.items()))
        for written in results:
            done |= written
        return done

    async def _send(self, leader: int, marker: Any) -> set[TopicPartition]:
        broker = self.image.brokers.get(leader)
        if broker is None or broker.fenced:
            return set()
        async with self._locks[leader]:
            try:
                connection = self._connections.get(leader)
                if connection is None:
                    connection = await BrokerConnection.open(
                        broker.host, broker.port, f"txn-coordinator-{self.node_id}",
                        self.timeout, self.security)
                    self._connections[leader] = connection
                response = await connection.request(
                    WriteTxnMarkersRequest(markers=[marker]), VERSION)
            except ConnectionFailed as exc:
                log.info("node %d: markers to broker %d failed: %s", self.node_id, leader, exc)
                self._drop(leader)
                return set()
        written = set()
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    if p.error_code == ErrorCode.NONE:
                        written.add(TopicPartition(topic.name, p.partition_index))
                    else:
                        log.info("node %d: marker for %s-%d: %s", self.node_id, topic.name,
                                 p.partition_index, ErrorCode(p.error_code).name)
        return written

    def _drop(self, leader: int) -> None:
        connection = self._connections.pop(leader, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for leader in list(self._connections):
            self._drop(leader)


def _topics(partitions: list[TopicPartition]) -> list[Any]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return [MarkerTopic(name=name, partition_indexes=sorted(indexes))
            for name, indexes in by_topic.items()]
