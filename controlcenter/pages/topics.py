"""The Topics pages: the list (search, sort, server-side pagination), create, and one topic:
partitions, leadership map, configs with their sources (edit and reset), throughput chart,
delete.

The list and the partition data come from the collector's tables. A topic's configs are
read on demand through clusterclient (the collector does not sample configs), bounded by
a short timeout; a dead cluster gives a note, never a hung page.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Page, Paginator
from django.db.models import F, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from clusterclient import ClusterRequestError, ClusterUnavailable, ConfigEntry
from controlcenter import actions, connection
from controlcenter.access import Capability, requires
from controlcenter.models import (
    BrokerState,
    ClusterState,
    PartitionState,
    ThroughputHistory,
    ThroughputKind,
    TopicState,
)
from controlcenter.pages.banners import cluster_banners
from controlcenter.pages.brokers import overrides_first

PER_PAGE = 50
SORTS = {"name": "name", "partitions": "partitions", "under_replicated": "under_replicated",
         "messages": "total_messages", "rate": "messages_in_per_sec"}
CHART_WINDOW = dt.timedelta(hours=1)
CHART_POINTS = 720


@require_GET
def topics(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    sort = request.GET.get("sort", "name")
    descending = sort.startswith("-")
    rows = search_topics(query, show_internal=request.GET.get("internal") == "1")
    rows = _sorted(rows, sort.lstrip("-"), descending)
    page = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))
    cluster = ClusterState.current()
    internal = request.GET.get("internal") == "1"
    context = {"cluster": cluster, "banners": cluster_banners(cluster), "page": page,
               "rows": [topic_row(t) for t in page], "q": query, "sort": sort,
               "internal": internal, "live_rows": live_view(query, internal, sort, page)}
    return render(request, "controlcenter/topics.html", context)


def topic_row(topic: TopicState) -> dict[str, Any]:
    """A row's template context: the topic and the values pages sort and filter it by."""
    values = {key: getattr(topic, field) for key, field in SORTS.items()}
    return {"t": topic, "values": json.dumps({**values, "internal": topic.internal})}


def topic_rows(names: list[str]) -> dict[str, Mapping[str, Any]]:
    """The live rows of these topics (events.register_rows); deleted ones are absent."""
    return {t.name: topic_row(t) for t in TopicState.objects.filter(name__in=names)}


def topic_count(key: str | None) -> Mapping[str, Any]:
    """The default view's count (internal topics hidden), pushed with every change."""
    return {"count": TopicState.objects.filter(internal=False).count()}


def live_view(query: str, show_internal: bool, sort: str, page: Page[TopicState]) -> str:
    """How this page orders and filters its rows, for placing pushed rows (live.js's
    applyRows): the same rules as search_topics and _sorted."""
    key = sort.lstrip("-") if sort.lstrip("-") in SORTS else "name"
    direction = -1 if sort.startswith("-") else 1
    match: dict[str, dict[str, Any]]
    if query:
        match = {"name": {"icontains": query}}
    else:
        match = {} if show_internal else {"internal": {"eq": False}}
    return json.dumps({"row_topic": "topics",
                       "order": [["internal", 1], [key, direction], ["name", 1]],
                       "filter": match, "first_page": page.number == 1,
                       "last_page": not page.has_next(), "per_page": PER_PAGE})


def search_topics(query: str, show_internal: bool) -> QuerySet[TopicState]:
    rows = TopicState.objects.all()
    if query:
        rows = rows.filter(name__icontains=query)
    elif not show_internal:
        # Internal topics are not what a user looks for first; a search still finds them.
        rows = rows.filter(internal=False)
    return rows


def _sorted(rows: QuerySet[TopicState], key: str, descending: bool) -> QuerySet[TopicState]:
    column = F(SORTS.get(key, "name"))
    order = column.desc(nulls_last=True) if descending else column.asc(nulls_first=True)
    return rows.order_by("internal", order, "name")


@require_GET
def topic(request: HttpRequest, name: str) -> HttpResponse:
    row = TopicState.objects.filter(name=name).first()
    cluster = ClusterState.current()
    if row is None:
        # Created moments ago (the collector samples every few seconds) or not there at all.
        return render(request, "controlcenter/topic_missing.html",
                      {"cluster": cluster, "banners": cluster_banners(cluster),
                       "topic_name": name}, status=404)
    configs, configs_error = topic_configs(name)
    context = {"cluster": cluster, "banners": cluster_banners(cluster), **topic_context(name),
               "configs": configs, "configs_error": configs_error,
               "config_form": ConfigForm(), "throughput": throughput_series(name)}
    return render(request, "controlcenter/topic.html", context)


def topic_context(name: str | None) -> Mapping[str, Any]:
    """What the topic's live fragments show (summary, partitions, leadership map)."""
    return {"topic": TopicState.objects.filter(name=name).first(),
            "partitions": list(PartitionState.objects.filter(topic=name)),
            "brokers": list(BrokerState.objects.all())}


def topic_configs(name: str) -> tuple[list[ConfigEntry], str]:
    try:
        return overrides_first(connection.cluster().topic_configs(name)), ""
    except ClusterRequestError as exc:
        return [], f"{exc.code_name}: {exc.message}"
    except ClusterUnavailable as exc:
        return [], f"The cluster did not answer: {exc.message}"


def throughput_series(name: str) -> dict[str, list[float | None]]:
    """The last hour of the topic's messages and bytes in per second, for uPlot."""
    since = timezone.now() - CHART_WINDOW
    points = list(ThroughputHistory.objects
                  .filter(kind=ThroughputKind.TOPIC, name=name, ts__gte=since)
                  .order_by("-ts")
                  .values_list("ts", "messages_in_per_sec", "bytes_in_per_sec")[:CHART_POINTS])
    points.reverse()
    return {"t": [p[0].timestamp() for p in points], "messages": [p[1] for p in points],
            "bytes": [p[2] for p in points]}


class TopicForm(forms.Form):
    name = forms.CharField(max_length=249, help_text="Letters, digits, '.', '_' and '-'.")
    partitions = forms.IntegerField(min_value=1, max_value=10000, required=False,
                                    help_text="Empty: the broker's num.partitions.")
    replication_factor = forms.IntegerField(
        min_value=1, max_value=32767, required=False,
        help_text="Empty: the broker's default.replication.factor.")
    configs = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "retention.ms=86400000"}),
        required=False, help_text="One name=value per line; the broker validates each.")

    def clean_configs(self) -> dict[str, str]:
        return parse_configs(self.cleaned_data["configs"])


def parse_configs(text: str) -> dict[str, str]:
    configs = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.strip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise forms.ValidationError(f"Line {number} is not name=value: {line.strip()!r}")
        configs[name.strip()] = value.strip()
    return configs


def topic_create(request: HttpRequest) -> HttpResponse:
    """GET shows the form (to anyone); POST creates, for users who may change topics."""
    if request.method == "POST":
        return _create(request)
    return render(request, "controlcenter/topic_create.html", {"form": TopicForm()})


@requires(Capability.CHANGE_TOPICS)
def _create(request: HttpRequest) -> HttpResponse:
    form = TopicForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            shortfall = actions.create_topic(request, data["name"], data["partitions"],
                                             data["replication_factor"], data["configs"])
        except actions.ActionError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Topic {data['name']} created; it appears in the "
                                      "list with the collector's next sample.")
            if shortfall is not None:
                messages.warning(request, shortfall.message)
            return redirect("topics")
    return render(request, "controlcenter/topic_create.html", {"form": form}, status=400)


@requires(Capability.CHANGE_TOPICS)
def topic_delete(request: HttpRequest, name: str) -> HttpResponse:
    if request.POST.get("confirm") != name:
        messages.error(request, f"Type the topic's name ({name}) to confirm the deletion.")
        return redirect("topic", name=name)
    try:
        actions.delete_topic(request, name)
    except actions.ActionError as exc:
        messages.error(request, f"Could not delete {name}. {exc}")
        return redirect("topic", name=name)
    messages.success(request, f"Topic {name} deleted.")
    return redirect("topics")


class ConfigForm(forms.Form):
    name = forms.CharField(max_length=255)
    value = forms.CharField(max_length=10000, required=False)
    op = forms.ChoiceField(choices=[("set", "set"), ("reset", "reset")], initial="set")


@requires(Capability.CHANGE_TOPICS)
def topic_config(request: HttpRequest, name: str) -> HttpResponse:
    form = ConfigForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Config change refused: {form.errors.as_text()}")
        return redirect("topic", name=name)
    data = form.cleaned_data
    try:
        if data["op"] == "reset":
            actions.reset_topic_config(request, name, data["name"])
        else:
            actions.set_topic_config(request, name, data["name"], data["value"])
    except actions.ActionError as exc:
        messages.error(request, f"{data['name']}: {exc}")
    else:
        messages.success(request, f"{data['name']}: {data['op']} done.")
    return redirect("topic", name=name)
