"""What the control center reads about a Kafka cluster, through confluent-kafka only.

The same code runs against the built-in cluster and an external Apache Kafka cluster: the
bootstrap servers are the only thing it knows.
"""

from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from django.conf import settings


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    is_controller: bool


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True)
class TopicInfo:
    name: str
    internal: bool
    partitions: list[PartitionInfo] = field(default_factory=list)

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class ClusterSnapshot:
    cluster_id: str | None
    brokers: list[BrokerInfo]
    topics: list[TopicInfo]


class ClusterUnavailable(Exception):
    """The cluster did not answer in time; the message says what the client saw."""


def admin_client() -> AdminClient:
    return AdminClient(
        {"bootstrap.servers": settings.KAFKA_BOOTSTRAP_SERVERS, "socket.timeout.ms": 5000}
    )


def describe_cluster(timeout: float = 5.0) -> ClusterSnapshot:
    try:
        metadata = admin_client().list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ClusterUnavailable(str(exc.args[0])) from exc
    brokers = [
        BrokerInfo(b.id, b.host, b.port, b.id == metadata.controller_id)
        for b in sorted(metadata.brokers.values(), key=lambda b: b.id)
    ]
    topics = [
        TopicInfo(
            name=t.topic,
            internal=t.topic.startswith("__"),
            partitions=[
                PartitionInfo(p.id, p.leader, list(p.replicas), list(p.isrs))
                for p in sorted(t.partitions.values(), key=lambda p: p.id)
            ],
        )
        # Internal topics (__consumer_offsets) last: a user looks for their own first.
        for t in sorted(metadata.topics.values(), key=lambda t: (t.topic.startswith("__"), t.topic))
    ]
    return ClusterSnapshot(metadata.cluster_id, brokers, topics)
