"""The overview: brokers, cluster health, consumer groups in trouble first, busiest topics.

Everything comes from the collector's tables; the fragments it pushes to the `overview`
group (registered in controlcenter/fragments.py) are rendered from the same contexts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import Case, F, IntegerField, Value, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from controlcenter import clusters
from controlcenter.models import BrokerState, BurrowStatus, ClusterState, GroupState, TopicState
from controlcenter.pages.banners import cluster_banners

GROUPS_SHOWN = 10
TOPICS_SHOWN = 10
# Burrow's statuses from worst to best: the order "groups in trouble first" sorts by.
SEVERITY = [BurrowStatus.ERR, BurrowStatus.STOP, BurrowStatus.STALL, BurrowStatus.REWIND,
            BurrowStatus.WARN, BurrowStatus.OK, BurrowStatus.NOTFOUND]


def overview(request: HttpRequest) -> HttpResponse:
    cluster = ClusterState.current()
    context = {
        "cluster": cluster,
        "banners": cluster_banners(cluster),
        "bootstrap_servers": clusters.current().bootstrap_servers,
        **brokers_context(None),
        **groups_in_trouble_context(None),
        **busiest_topics_context(None),
    }
    return render(request, "controlcenter/overview.html", context)


def brokers_context(key: str | None) -> Mapping[str, Any]:
    return {"brokers": list(BrokerState.objects.all())}


def groups_in_trouble_context(key: str | None) -> Mapping[str, Any]:
    severity = Case(*[When(status=s, then=Value(i)) for i, s in enumerate(SEVERITY)],
                    default=Value(len(SEVERITY)), output_field=IntegerField())
    groups = GroupState.objects.annotate(severity=severity).order_by(
        "severity", "-max_lag", "group_id")[:GROUPS_SHOWN]
    return {"groups": list(groups), "groups_total": GroupState.objects.count()}


def busiest_topics_context(key: str | None) -> Mapping[str, Any]:
    """User topics first (internal ones last), the busiest and the unhealthy on top."""
    topics = TopicState.objects.order_by(
        "internal", "-under_replicated", "-offline",
        F("messages_in_per_sec").desc(nulls_last=True), "name")[:TOPICS_SHOWN]
    return {"topics": list(topics), "topics_total": TopicState.objects.count()}
