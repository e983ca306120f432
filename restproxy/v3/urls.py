"""v3 routes: Confluent's paths under v3/clusters/{cluster_id}."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import groups, produce
from . import views as v3

C = r"v3/clusters/(?P<cluster_id>[^/]+)"
T = rf"{C}/topics/(?P<topic>[^/:]+)"
G = rf"{C}/consumer-groups/(?P<group>[^/]+)"
CONSUMER = rf"{G}/consumers/(?P<consumer>[^/]+)"


def v3_patterns(route: Callable[..., Any]) -> list[Any]:
    return [
        route("v3/clusters", v3.ClusterListView),
        route(C, v3.ClusterDetailView),
        route(f"{C}/brokers", v3.BrokerListView),
        route(rf"{C}/brokers/(?P<broker_id>[^/]+)", v3.BrokerDetailView),
        route(rf"{C}/brokers/(?P<broker_id>[^/]+)/configs", v3.BrokerConfigListView),
        route(rf"{C}/brokers/(?P<broker_id>[^/]+)/configs/(?P<name>[^/]+)",
              v3.BrokerConfigDetailView),
        route(f"{C}/topics", v3.TopicListView),
        route(T, v3.TopicDetailView),
        route(f"{T}/configs", v3.TopicConfigListView),
        route(f"{T}/configs:alter", v3.TopicConfigAlterView),
        route(rf"{T}/configs/(?P<name>[^/]+)", v3.TopicConfigDetailView),
        route(f"{T}/partitions", v3.PartitionListView),
        route(rf"{T}/partitions/(?P<partition>[^/]+)", v3.PartitionDetailView),
        route(rf"{T}/partitions/(?P<partition>[^/]+)/replicas", v3.ReplicaListView),
        route(f"{T}/records", produce.RecordsView),
        route(f"{T}/records:batch", produce.RecordsBatchView),
        route(f"{C}/consumer-groups", groups.GroupListView),
        route(G, groups.GroupDetailView),
        route(f"{G}/consumers", groups.ConsumerListView),
        route(CONSUMER, groups.ConsumerDetailView),
        route(f"{CONSUMER}/assignments", groups.AssignmentListView),
        route(f"{G}/lags", groups.LagListView),
        route(rf"{G}/lags/(?P<topic>[^/]+)/partitions/(?P<partition>[^/]+)",
              groups.LagDetailView),
        route(f"{G}/lag-summary", groups.LagSummaryView),
    ]
