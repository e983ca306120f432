"""v3 consumer groups (read-only, as Confluent): groups, consumers, assignments, lags."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import OffsetSpec
from rest_framework.request import Request
from rest_framework.response import Response

from . import errors, resources_groups
from . import kafka_admin as admin
from .views_v3 import ClusterView


def _describe(group_id: str) -> Any:
    description = admin.describe_group(group_id)
    state = getattr(description.state, "name", "")
    if state.upper() == "DEAD" and not description.members:
        raise errors.group_not_found(group_id)
    return description


def _member(description: Any, consumer_id: str) -> Any:
    for member in description.members:
        if member.member_id == consumer_id:
            return member
    raise errors.RestProxyError(404, 404, f"Consumer {consumer_id} cannot be found.")


def lag_rows(description: Any) -> list[dict[str, Any]]:
    owners = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[(tp.topic, tp.partition)] = member
    committed = [tp for tp in admin.group_offsets(description.group_id) if tp.offset >= 0]
    by_topic: dict[str, list[int]] = {}
    for tp in committed:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    ends = {(t, p): o for t, ps in by_topic.items()
            for p, o in admin.offsets(t, ps, OffsetSpec.latest()).items()}
    rows = []
    for tp in sorted(committed, key=lambda tp: (tp.topic, tp.partition)):
        end = ends[(tp.topic, tp.partition)]
        owner = owners.get((tp.topic, tp.partition))
        rows.append({
            "topic_name": tp.topic, "partition_id": tp.partition, "current_offset": tp.offset,
            "log_end_offset": end, "lag": max(0, end - tp.offset),
            "consumer_id": owner.member_id if owner else "",
            "instance_id": owner.group_instance_id if owner else None,
            "client_id": owner.client_id if owner else "",
        })
    return rows


class GroupListView(ClusterView):
    def get(self, request: Request, cluster_id: str) -> Response:
        ids = [g.group_id for g in admin.list_groups()]
        data = [resources_groups.group(self.links, admin.describe_group(g)) for g in ids]
        return Response(self.links.collection("KafkaConsumerGroupList", ("consumer-groups",),
                                              data))


class GroupDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str) -> Response:
        return Response(resources_groups.group(self.links, _describe(group)))


class ConsumerListView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str) -> Response:
        members = _describe(group).members
        data = [resources_groups.consumer(self.links, group, m) for m in members]
        return Response(self.links.collection(
            "KafkaConsumerList", ("consumer-groups", group, "consumers"), data))


class ConsumerDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str, consumer: str) -> Response:
        member = _member(_describe(group), consumer)
        return Response(resources_groups.consumer(self.links, group, member))


class AssignmentListView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str, consumer: str) -> Response:
        member = _member(_describe(group), consumer)
        tps = member.assignment.topic_partitions if member.assignment else []
        data = [resources_groups.assignment(self.links, group, consumer, tp) for tp in tps]
        return Response(self.links.collection(
            "KafkaConsumerAssignmentList",
            ("consumer-groups", group, "consumers", consumer, "assignments"), data))


class LagListView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str) -> Response:
        rows = lag_rows(_describe(group))
        data = [resources_groups.lag(self.links, group, row) for row in rows]
        return Response(self.links.collection(
            "KafkaConsumerLagList", ("consumer-groups", group, "lags"), data))


class LagDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str, topic: str,
            partition: str) -> Response:
        for row in lag_rows(_describe(group)):
            if row["topic_name"] == topic and str(row["partition_id"]) == partition:
                return Response(resources_groups.lag(self.links, group, row))
        raise errors.partition_not_found(partition)


class LagSummaryView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str) -> Response:
        rows = lag_rows(_describe(group))
        return Response(resources_groups.lag_summary(self.links, group, rows))
