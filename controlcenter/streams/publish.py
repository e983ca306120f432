"""What the streams pages receive live: the queries table (`streams` group), a query's status
(`stream.<id>`, both server-rendered fragments, registered so a reconnecting page gets them
again) and its progress points (`stream.<id>`, a `stream-progress` data message that
frontend/js/streams.js adds to the charts)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from django.template.loader import render_to_string

from controlcenter import events
from controlcenter.streams.models import ACTIVE, LagAlert, QueryKind, StreamQuery

log = logging.getLogger(__name__)

TABLE_ID = "stream-queries"
TABLE_TEMPLATE = "controlcenter/fragments/stream_table.html"
STATUS_TEMPLATE = "controlcenter/fragments/stream_status.html"


STATUS_ID = "stream-status"  # one query per page
ALERTS_ID = "group-alerts"  # on a consumer group's page (`group.<id>`)
ALERTS_TEMPLATE = "controlcenter/fragments/group_alerts.html"
ALERTS_SHOWN = 20


def table_context(key: str | None = None) -> Mapping[str, Any]:
    return {"queries": list(StreamQuery.objects.all())}


def status_context(key: str | None) -> Mapping[str, Any]:
    return {"query": StreamQuery.objects.filter(pk=int(key or 0)).first()}


def alerts_context(group_id: str | None) -> Mapping[str, Any]:
    """A group's lag-anomaly alerts, newest first; the topics whose latest alert is RAISED
    are anomalous now; the lag-anomaly queries, to say whether any watches."""
    alerts = list(LagAlert.objects.filter(group_id=group_id)[:ALERTS_SHOWN])
    latest: dict[str, LagAlert] = {}
    for alert in LagAlert.objects.filter(group_id=group_id).order_by("topic", "-ts", "-pk"):
        latest.setdefault(alert.topic, alert)
    watching = list(StreamQuery.objects.filter(kind=QueryKind.LAG_ANOMALY))
    return {"alerts": alerts, "group_id": group_id,
            "anomalous": sorted(t for t, a in latest.items() if a.state == "RAISED"),
            "watchers": watching, "watching": any(q.state in ACTIVE for q in watching)}


def register() -> None:
    """The fragments a (re)connecting page is sent (`fragments.register` calls this)."""
    events.register_fragment("streams", TABLE_ID, TABLE_TEMPLATE, table_context)
    events.register_fragment("stream", STATUS_ID, STATUS_TEMPLATE, status_context)
    events.register_fragment("group", ALERTS_ID, ALERTS_TEMPLATE, alerts_context)


def group_alerts(group_id: str) -> None:
    """Push a group's alerts to its open pages."""
    try:
        events.publish(events.group_name("group", group_id), events.fragment_message(
            ALERTS_ID, render_to_string(ALERTS_TEMPLATE, alerts_context(group_id))))
    except Exception:  # a push is a courtesy: the rows are the truth
        log.warning("could not publish lag alerts of group %s", group_id, exc_info=True)


def query_changed(query_id: int) -> None:
    """Push the queries table and the query's status to open pages."""
    try:
        events.publish(events.group_name("streams"), events.fragment_message(
            TABLE_ID, render_to_string(TABLE_TEMPLATE, table_context())))
        context = status_context(str(query_id))
        if context["query"] is not None:
            events.publish(events.group_name("stream", query_id), events.fragment_message(
                STATUS_ID, render_to_string(STATUS_TEMPLATE, context)))
    except Exception:  # a push is a courtesy: the row is the truth
        log.warning("could not publish stream query %s", query_id, exc_info=True)


def progress(query_id: int, point: Mapping[str, Any]) -> None:
    try:
        events.publish(events.group_name("stream", query_id), json.dumps(
            {"type": "stream-progress", "query": query_id, "point": dict(point)}, default=str))
    except Exception:  # a push is a courtesy: the row is the truth
        log.warning("could not publish progress of stream query %s", query_id, exc_info=True)
