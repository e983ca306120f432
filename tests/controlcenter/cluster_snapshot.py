"""A collector snapshot written straight into the read model, for page tests that need a
known cluster state without running the collector."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from controlcenter.models import (
    BrokerState,
    BurrowStatus,
    ClusterState,
    GroupState,
    PartitionState,
    TopicState,
)


def seed(topics: dict[str, int] | None = None, reachable: bool = True) -> ClusterState:
    """Three brokers (1 the controller, 3 down), the given topics (name -> partitions) with
    replicas on all three brokers, partition 0 of each under-replicated, and two groups."""
    now = timezone.now()
    cluster = ClusterState.objects.create(
        bootstrap_servers=settings.KAFKA_BOOTSTRAP_SERVERS, cluster_id="seeded", controller_id=1,
        collected_at=now, reachable=reachable, brokers=2,
        last_error="" if reachable else "_TRANSPORT: all brokers down",
        unreachable_since=None if reachable else now, active_controller_count=1,
        preferred_leader_ratio=0.5)
    for node_id, status in ((1, "up"), (2, "up"), (3, "down")):
        BrokerState.objects.create(node_id=node_id, host="127.0.0.1", port=9091 + node_id,
                                   status=status, is_controller=node_id == 1, partitions=4,
                                   leaders=2 if status == "up" else 0, updated_at=now,
                                   process_state="running" if status == "up" else "killed",
                                   bytes_in_per_sec=1500.0)
    for name, count in (topics or {"orders": 3, "__consumer_offsets": 2}).items():
        TopicState.objects.create(name=name, internal=name.startswith("__"), partitions=count,
                                  replication_factor=3, under_replicated=1, total_messages=10,
                                  updated_at=now)
        for p in range(count):
            PartitionState.objects.create(
                topic=name, partition=p, leader=1 if p % 2 == 0 else 2, replicas=[1, 2, 3],
                isr=[1, 2] if p == 0 else [1, 2, 3], under_replicated=p == 0,
                log_start_offset=0, log_end_offset=5, updated_at=now)
    GroupState.objects.create(group_id="calm", state="Stable", status=BurrowStatus.OK,
                              max_lag=1, updated_at=now)
    GroupState.objects.create(group_id="stuck", state="Stable", status=BurrowStatus.ERR,
                              max_lag=900, updated_at=now)
    return cluster
