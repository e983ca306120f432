"""What the fault tests share: the cluster's test settings and questions asked over the wire.

Leaders, ISRs and the active controller are read the way a client reads them, from
Metadata (confluent-kafka's AdminClient), not from the brokers' insides.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka.admin import AdminClient

T = TypeVar("T")

# Short sessions and lag limits so a fault is noticed in seconds, not Kafka's 9 s / 30 s.
FAST_FAILOVER = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "unclean.leader.election.enable": "false",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "2",
    # Any imbalance triggers a preferred election, so leadership visibly returns.
    "leader.imbalance.per.broker.percentage": "0",
}
TOPIC_CONFIGS = {"min.insync.replicas": "2"}


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def preferred(self) -> int:
        return self.replicas[0]


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = 60.0,
               every: float = 0.2) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        # A probe of a cluster under faults fails in whichever client's error type it uses;
        # the last error is in the timeout's message.
        except Exception as exc:  # noqa: BLE001 - kept and reported on timeout
            last = None
            error = exc
        else:
            error = None
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting until {what} "
                         f"(last: {last!r}, error: {error!r})")


class ClusterView:
    """Metadata as clients see it, from whichever broker answers."""

    def __init__(self, bootstrap: str) -> None:
        # A paused broker keeps its connections open: librdkafka's default 60 s socket
        # timeout held this view's Metadata requests on it for a minute in pause rounds.
        self.admin = AdminClient({"bootstrap.servers": bootstrap,
                                  "topic.metadata.refresh.interval.ms": 500,
                                  "socket.timeout.ms": 10_000})

    def partitions(self, topic: str) -> dict[int, PartitionView]:
        meta = self.admin.list_topics(topic, timeout=5)
        found = meta.topics[topic]
        if found.error is not None:
            raise RuntimeError(str(found.error))
        return {p: PartitionView(m.leader, tuple(m.replicas), tuple(m.isrs))
                for p, m in found.partitions.items()}

    def partition(self, topic: str, partition: int) -> PartitionView:
        return self.partitions(topic)[partition]

    def live_brokers(self) -> set[int]:
        return set(self.admin.list_topics(timeout=5).brokers)

    def group_coordinator(self, group: str) -> int:
        [future] = self.admin.describe_consumer_groups([group]).values()
        return int(future.result(10).coordinator.id)

    # -- waits ---------------------------------------------------------------------------
    def new_leader(self, topic: str, partition: int, old: int, timeout: float = 60.0) -> int:
        def moved() -> int | None:
            leader = self.partition(topic, partition).leader
            return leader if leader not in (old, -1) else None
        return wait_until(f"{topic}-{partition} has a leader other than {old}", moved, timeout)

    def fully_replicated(self, topic: str, timeout: float = 90.0) -> dict[int, PartitionView]:
        def in_sync() -> dict[int, PartitionView] | None:
            ps = self.partitions(topic)
            return ps if all(set(v.isr) == set(v.replicas) for v in ps.values()) else None
        return wait_until(f"every replica of {topic} is in sync", in_sync, timeout)

    def preferred_leaders(self, topic: str, timeout: float = 90.0) -> dict[int, PartitionView]:
        def preferred() -> dict[int, PartitionView] | None:
            ps = self.partitions(topic)
            return ps if all(v.leader == v.preferred for v in ps.values()) else None
        return wait_until(f"every partition of {topic} is led by its preferred replica",
                          preferred, timeout)

    def fenced(self, topic: str, broker: int) -> bool:
        """The broker is out of the cluster's view, or at least out of every ISR."""
        return broker not in self.live_brokers() or all(
            broker not in p.isr for p in self.partitions(topic).values())
