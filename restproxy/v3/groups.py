"""v3 consumer groups (read-only, as Confluent): groups, consumers, assignments, lags."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from clusterclient import ConsumerGroup, GroupLag, GroupMember, PartitionLag
from restproxy import errors
from restproxy.client import cluster

from . import resources_groups
from .views import ClusterView


def _describe(group_id: str) -> ConsumerGroup:
    description = cluster().describe_group(group_id)
    if description.state == "DEAD" and not description.members:
        raise errors.group_not_found(group_id)
    return description


def _member(description: ConsumerGroup, consumer_id: str) -> GroupMember:
    for member in description.members:
        if member.member_id == consumer_id:
            return member
    raise errors.RestProxyError(404, 404, f"Consumer {consumer_id} cannot be found.")


def group_lag(group_id: str) -> GroupLag:
    """clusterclient's lag of the partitions the group has committed (Confluent shows no
    others); an end offset that could not be read fails the request, as before."""
    lag = cluster().group_lag(group_id)
    committed = tuple(p for p in lag.partitions if p.committed_offset is not None)
    for p in committed:
        problem = lag.errors.get(p.topic_partition)
        if problem is not None:
            raise problem
    return replace(lag, partitions=committed)


def lag_row(p: PartitionLag) -> dict[str, Any]:
    owner = p.member
    return {
        "topic_name": p.topic, "partition_id": p.partition,
        "current_offset": p.committed_offset, "log_end_offset": p.log_end_offset,
        "lag": p.lag,
        "consumer_id": owner.member_id if owner else "",
        "instance_id": owner.group_instance_id if owner else None,
        "client_id": owner.client_id if owner else "",
    }


class GroupListView(ClusterView):
    def get(self, request: Request, cluster_id: str) -> Response:
        ids = [g.group_id for g in cluster().list_groups()]
        described = cluster().describe_groups(ids)
        data = [resources_groups.group(self.links, described[g]) for g in ids]
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
        data = [resources_groups.assignment(self.links, group, consumer, tp)
                for tp in member.assignment]
        return Response(self.links.collection(
            "KafkaConsumerAssignmentList",
            ("consumer-groups", group, "consumers", consumer, "assignments"), data))


class LagListView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str) -> Response:
        _describe(group)
        data = [resources_groups.lag(self.links, group, lag_row(p))
                for p in group_lag(group).partitions]
        return Response(self.links.collection(
            "KafkaConsumerLagList", ("consumer-groups", group, "lags"), data))


class LagDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str, topic: str,
            partition: str) -> Response:
        _describe(group)
        for p in group_lag(group).partitions:
            if p.topic == topic and str(p.partition) == partition:
                return Response(resources_groups.lag(self.links, group, lag_row(p)))
        raise errors.partition_not_found(partition)


class LagSummaryView(ClusterView):
    def get(self, request: Request, cluster_id: str, group: str) -> Response:
        _describe(group)
        lag = group_lag(group)
        worst = lag.max_lag_partition
        return Response(resources_groups.lag_summary(
            self.links, group, lag.total_lag, None if worst is None else lag_row(worst)))
