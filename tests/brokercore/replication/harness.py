"""Several replica managers with real Kafka listeners in one process, metadata driven by hand.

Each `Node` is what a broker is to replication: a `ReplicaManager` with its own log dir
and image, behind a real `KafkaServer` on 127.0.0.1. The `Cluster` plays the controller:
it applies the same records, in the same order, to every running node, and a node that
restarts replays the whole history first, as a broker replays its metadata log. Its
`alter_partition` checks epochs as the controller does and applies a `partition_change`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

import brokercore.handlers  # noqa: F401  (registers every API handler)
from brokercore.clock import SystemClock
from brokercore.config import BrokerConfig
from brokercore.controller.image import MetadataImage, PartitionRegistration, Record
from brokercore.controller.records import from_json
from brokercore.handlers.parts import BrokerParts
from brokercore.protocol.errors import ErrorCode
from brokercore.replication.connection import BrokerConnection
from brokercore.replication.log_dirs import open_log_dirs
from brokercore.replication.partition import Partition
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.server import KafkaServer
from brokercore.topic_partition import TopicPartition

FAST = {
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "50",
    "replica.lag.time.max.ms": "1000",
    "replica.socket.timeout.ms": "5000",
    "replica.high.watermark.checkpoint.interval.ms": "200",
}


class ControllerRefusal(Exception):
    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


@dataclass(frozen=True)
class _ImageOnly:
    """The part of the controller that the harness's nodes have: the metadata image."""

    image: MetadataImage


class Node:
    def __init__(self, node_id: int, data_dir: Path, port: int, overrides: dict[str, str]) -> None:
        self.node_id = node_id
        self.config = BrokerConfig({
            "node.id": str(node_id), "log.dirs": str(data_dir),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}", **FAST, **overrides,
        })
        data_dir.mkdir(parents=True, exist_ok=True)
        self.image = MetadataImage()
        self.replica_manager = ReplicaManager(
            self.config, self.image, open_log_dirs(self.config.log_dirs, node_id), SystemClock())
        # Replication's handlers (Produce, Fetch, ListOffsets...) use no groups, and of the
        # controller only its image (the leaders that KIP-951's hints name).
        parts = BrokerParts(node_id, self.config, self.replica_manager,
                            controller=_ImageOnly(self.image), groups=None,  # type: ignore[arg-type]
                            transactions=None, verifier=None)  # type: ignore[arg-type]
        self.server = KafkaServer(parts, "127.0.0.1", port)
        self.running = False

    def apply(self, raw: Record, offset: int) -> None:
        record = from_json(raw)
        self.image.apply(record, offset)
        if self.running:
            self.replica_manager.on_metadata(record)

    def partition(self, topic: str, index: int = 0) -> Partition:
        return self.replica_manager.partitions[TopicPartition(topic, index)]

    async def start(self) -> int:
        port = await self.server.start()
        await self.replica_manager.load()
        self.replica_manager.start()
        self.running = True
        return port

    async def stop(self) -> None:
        self.running = False
        await self.server.stop()
        await self.replica_manager.stop()


class Cluster:
    def __init__(self, data_dir: Path, size: int, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.overrides = overrides or {}
        self.history: list[Record] = []
        self.nodes: dict[int, Node] = {i: self._node(i, 0) for i in range(1, size + 1)}
        self.alter_calls: list[list[int]] = []

    def _node(self, node_id: int, port: int) -> Node:
        node = Node(node_id, self.data_dir / f"broker-{node_id}", port, self.overrides)
        node.replica_manager.isr.alter_partition = self.alter_partition
        return node

    async def start(self) -> Cluster:
        ports = {node_id: await node.start() for node_id, node in self.nodes.items()}
        for node_id, port in ports.items():
            self.apply({"type": "broker", "node_id": node_id, "host": "127.0.0.1",
                        "port": port, "fenced": False, "epoch": 0})
        return self

    async def stop(self) -> None:
        for node in self.nodes.values():
            if node.running:
                await node.stop()

    def apply(self, *records: Record) -> None:
        for record in records:
            self.history.append(record)
            offset = len(self.history) - 1
            for node in self.nodes.values():
                if node.running:
                    node.apply(record, offset)

    async def stop_node(self, node_id: int) -> None:
        await self.nodes[node_id].stop()

    async def restart_node(self, node_id: int) -> Node:
        """A new process for the same broker: same log dir and port, metadata replayed."""
        old = self.nodes[node_id]
        if old.running:
            await old.stop()
        node = self.nodes[node_id] = self._node(node_id, old.server.port)
        for offset, record in enumerate(self.history):
            node.image.apply(from_json(record), offset)
        await node.start()
        return node

    # -- the controller's part ------------------------------------------------------------
    async def create_topic(self, name: str, replicas: list[int], partitions: int = 1,
                           configs: dict[str, str] | None = None) -> str:
        """Apply the topic's records, and return once every running node has opened its
        replicas (a replica manager opens logs in the background)."""
        topic_id = str(uuid.uuid4())
        records: list[Record] = [{"type": "topic", "name": name, "topic_id": topic_id}]
        records += [{"type": "config", "resource": "topic", "name": name, "key": k, "value": v}
                    for k, v in (configs or {}).items()]
        records += [{"type": "partition", "topic_id": topic_id, "partition": p,
                     "replicas": replicas, "isr": replicas, "leader": replicas[0],
                     "leader_epoch": 0} for p in range(partitions)]
        self.apply(*records)
        for node in self.nodes.values():
            if node.running:
                await node.replica_manager.settled()
        return topic_id

    def registration(self, topic: str, index: int = 0) -> PartitionRegistration:
        return self.history_image().topics[topic].partitions[index]

    def history_image(self) -> MetadataImage:
        image = MetadataImage()
        for offset, record in enumerate(self.history):
            image.apply(from_json(record), offset)
        return image

    def change_leader(self, topic: str, leader: int, isr: list[int] | None = None,
                      index: int = 0) -> None:
        current = self.registration(topic, index)
        change: Record = {"type": "partition_change",
                          "topic_id": self.history_image().topics[topic].topic_id,
                          "partition": index, "leader": leader,
                          "leader_epoch": current.leader_epoch + 1}
        if isr is not None:
            change["isr"] = isr
        self.apply(change)

    async def alter_partition(self, topic_id: str, partition: int, leader_id: int,
                              leader_epoch: int, partition_epoch: int, isr: list[int]) -> Any:
        await asyncio.sleep(0)  # an answer never comes back synchronously
        image = self.history_image()
        current = image.topics_by_id[topic_id].partitions[partition]
        if leader_id != current.leader or leader_epoch != current.leader_epoch:
            raise ControllerRefusal(ErrorCode.FENCED_LEADER_EPOCH)
        if partition_epoch != current.partition_epoch:
            raise ControllerRefusal(ErrorCode.INVALID_UPDATE_VERSION)
        self.alter_calls.append(list(isr))
        self.apply({"type": "partition_change", "topic_id": topic_id, "partition": partition,
                    "isr": list(isr)})
        return self.registration(image.topics_by_id[topic_id].name, partition)


async def eventually(check: Callable[[], bool], what: str, limit: float = 15.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.02)


class Client:
    """Produce, fetch and list offsets over a real connection, as a client would."""

    def __init__(self, connection: BrokerConnection) -> None:
        self.connection = connection

    @classmethod
    async def to(cls, node: Node) -> Client:
        return cls(await BrokerConnection.open("127.0.0.1", node.server.port, "test", 10.0))

    def close(self) -> None:
        self.connection.close()

    async def produce(self, topic: str, records: bytes, acks: int = -1,
                      timeout_ms: int = 5000, index: int = 0) -> Any:
        data = ProduceRequest.TopicProduceData
        request = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms,
                                 topic_data=[data(name=topic, partition_data=[
                                     data.PartitionProduceData(index=index, records=records)])])
        response = await self.connection.request(request, 8)
        return response.responses[0].partition_responses[0]

    async def fetch(self, topic: str, offset: int, replica_id: int = -1, max_wait_ms: int = 0,
                    index: int = 0) -> Any:
        topic_spec = FetchRequest.FetchTopic
        request = FetchRequest(
            replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=2**20,
            isolation_level=0, session_id=0, session_epoch=-1, cluster_id=None, rack_id="",
            topics=[topic_spec(topic=topic, partitions=[topic_spec.FetchPartition(
                partition=index, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=2**20)])],
            forgotten_topics_data=[])
        response = await self.connection.request(request, 12)
        return response.responses[0].partitions[0]

    async def delete_records(self, topic: str, offset: int, timeout_ms: int = 5000,
                             index: int = 0) -> Any:
        spec = DeleteRecordsRequest.DeleteRecordsTopic
        request = DeleteRecordsRequest(timeout_ms=timeout_ms, topics=[spec(
            name=topic, partitions=[spec.DeleteRecordsPartition(partition_index=index,
                                                                offset=offset)])])
        response = await self.connection.request(request, 2)
        return response.topics[0].partitions[0]

    async def latest(self, topic: str, index: int = 0) -> Any:
        return await self.list_offsets(topic, -1, index)

    async def list_offsets(self, topic: str, timestamp: int, index: int = 0) -> Any:
        spec = ListOffsetsRequest.ListOffsetsTopic
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[spec(
            name=topic, partitions=[spec.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=-1, timestamp=timestamp)])])
        response = await self.connection.request(request, 4)
        return response.topics[0].partitions[0]
