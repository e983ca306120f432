"""The Consumer groups pages: the list (search, sort, server-side pagination), one group
(members and assignments, per-partition lag with Burrow status, lag history chart), reset
offsets (dry run, then execute) and delete.

The list, the group and its history come from the collector's tables. Only the reset's dry
run and its execution read the cluster (through actions, bounded by clusterclient's timeout),
because a plan must be what the broker would commit now.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Case, F, IntegerField, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_duration
from django.views.decorators.http import require_GET

from controlcenter import actions
from controlcenter.access import Capability, requires
from controlcenter.models import (
    ClusterState,
    GroupLagHistory,
    GroupPartitionLag,
    GroupState,
)
from controlcenter.offsetreset import ResetMode, ResetSpec
from controlcenter.pages.banners import cluster_banners
from controlcenter.pages.overview import SEVERITY
from controlcenter.streams.publish import alerts_context

PER_PAGE = 50
SORTS = {"group": "group_id", "type": "group_type", "state": "state", "members": "members",
         "lag": "total_lag", "max_lag": "max_lag", "seconds": "max_lag_seconds",
         "status": "severity"}
DEFAULT_SORT = "status"
WINDOWS = {"15m": dt.timedelta(minutes=15), "1h": dt.timedelta(hours=1),
           "24h": dt.timedelta(hours=24), "7d": dt.timedelta(days=7)}
DEFAULT_WINDOW = "1h"
CHART_POINTS = 1500  # at most, spread evenly over the window


# --- the list -----------------------------------------------------------------------------


def group_rows(query: str = "", sort: str = DEFAULT_SORT) -> QuerySet[GroupState]:
    """Groups whose id contains `query`, sorted by a SORTS key (`-` first: descending).
    The default, by status, puts groups in trouble first, then the most lagging."""
    severity = Case(*[When(status=s, then=Value(i)) for i, s in enumerate(SEVERITY)],
                    default=Value(len(SEVERITY)), output_field=IntegerField())
    rows = GroupState.objects.annotate(severity=severity)
    if query:
        rows = rows.filter(group_id__icontains=query)
    key = sort.lstrip("-")
    column = F(SORTS.get(key, SORTS[DEFAULT_SORT]))
    descending = sort.startswith("-")
    order = column.desc(nulls_last=True) if descending else column.asc(nulls_last=True)
    return rows.order_by(order, "-max_lag", "group_id")


def groups_context(key: str | None) -> Mapping[str, Any]:
    """The live list: the default view (first page, worst first), which is what the
    collector pushes to the `groups` event group."""
    page = Paginator(group_rows(), PER_PAGE).get_page(1)
    return {"page": page, "live": True, "q": "", "sort": DEFAULT_SORT}


@require_GET
def groups(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    sort = request.GET.get("sort", DEFAULT_SORT)
    if sort.lstrip("-") not in SORTS:
        sort = DEFAULT_SORT
    page = Paginator(group_rows(query, sort), PER_PAGE).get_page(request.GET.get("page"))
    cluster = ClusterState.current()
    # Only the default view is pushed live: a search or another page keeps what it shows.
    live = not query and sort == DEFAULT_SORT and page.number == 1
    context = {"cluster": cluster, "banners": cluster_banners(cluster), "page": page,
               "q": query, "sort": sort, "live": live, "sorts": list(SORTS)}
    return render(request, "controlcenter/groups.html", context)


# --- one group ----------------------------------------------------------------------------


@dataclass
class Member:
    consumer_id: str
    client_id: str
    host: str
    assignment: list[str] = field(default_factory=list)


def group_context(group_id: str | None) -> Mapping[str, Any]:
    """What the group's live fragments show: summary, members, partitions."""
    partitions = list(GroupPartitionLag.objects.filter(group_id=group_id))
    members: dict[str, Member] = {}
    for p in partitions:
        if p.consumer_id:
            member = members.setdefault(p.consumer_id, Member(p.consumer_id, p.client_id, p.host))
            member.assignment.append(f"{p.topic}-{p.partition}")
    return {"group": GroupState.objects.filter(group_id=group_id).first(),
            "partitions": partitions, "members": list(members.values())}


def lag_history(group_id: str, window: str) -> dict[str, Any]:
    """The group's lag over `window` for uPlot: times, total lag, max lag in seconds, and
    the window's bounds (the chart's x axis spans them, however few points there are)."""
    until = timezone.now()
    since = until - WINDOWS.get(window, WINDOWS[DEFAULT_WINDOW])
    rows = GroupLagHistory.objects.filter(group_id=group_id, ts__gte=since).order_by("ts")
    total = rows.count()
    step = max(1, -(-total // CHART_POINTS))
    points = list(rows.values_list("ts", "total_lag", "max_lag_seconds"))[::step]
    return {"t": [p[0].timestamp() for p in points], "lag": [p[1] for p in points],
            "seconds": [p[2] for p in points],
            "since": since.timestamp(), "until": until.timestamp()}


@require_GET
def group(request: HttpRequest, group_id: str) -> HttpResponse:
    cluster = ClusterState.current()
    context = group_context(group_id)
    if context["group"] is None:
        return render(request, "controlcenter/group_missing.html",
                      {"cluster": cluster, "banners": cluster_banners(cluster),
                       "group_id": group_id}, status=404)
    window = request.GET.get("window", DEFAULT_WINDOW)
    window = window if window in WINDOWS else DEFAULT_WINDOW
    return render(request, "controlcenter/group.html", {
        "cluster": cluster, "banners": cluster_banners(cluster), **context,
        "group_id": group_id, "window": window, "windows": list(WINDOWS),
        "history": lag_history(group_id, window), "lag_alerts": alerts_context(group_id)})


# --- reset offsets, delete ----------------------------------------------------------------


class ResetForm(forms.Form):
    mode = forms.ChoiceField(choices=[(m.value, m.value) for m in ResetMode],
                             initial=ResetMode.LATEST.value)
    topic = forms.CharField(max_length=249, required=False,
                            widget=forms.TextInput(attrs={"list": "group-topics"}),
                            help_text="Empty: every topic the group has committed offsets for.")
    offset = forms.IntegerField(required=False, min_value=0, help_text="For to-offset.")
    shift = forms.IntegerField(required=False,
                               help_text="For shift-by: negative moves back (re-read).")
    datetime = forms.DateTimeField(
        required=False, label="Date and time (UTC)",
        help_text="For to-datetime: the first offset at or after it.",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
        input_formats=["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S"])
    duration = forms.CharField(required=False, max_length=40,
                               help_text="For by-duration, back from now: PT15M, P1DT2H or "
                                         "HH:MM:SS.")

    NEEDS = {ResetMode.TO_OFFSET: "offset", ResetMode.SHIFT_BY: "shift",
             ResetMode.TO_DATETIME: "datetime", ResetMode.BY_DURATION: "duration"}

    def clean_duration(self) -> dt.timedelta | None:
        text = self.cleaned_data["duration"].strip()
        if not text:
            return None
        duration = parse_duration(text)
        if duration is None or duration <= dt.timedelta(0):
            raise forms.ValidationError(f"Not a positive duration: {text!r} (try PT15M).")
        return duration

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        mode = data.get("mode")
        needed = self.NEEDS.get(ResetMode(mode)) if mode else None
        if needed and data.get(needed) is None and needed not in self.errors:
            self.add_error(needed, f"{mode} needs a value here.")
        return data

    def spec(self) -> ResetSpec:
        data = self.cleaned_data
        at = data["datetime"]
        if at is not None:
            at = at.replace(tzinfo=dt.UTC) if timezone.is_naive(at) else at
        return ResetSpec(ResetMode(data["mode"]), data["topic"].strip() or None,
                         offset=data["offset"], shift=data["shift"], at=at,
                         duration=data["duration"])


def group_reset(request: HttpRequest, group_id: str) -> HttpResponse:
    """GET shows the form (to anyone); POST runs the dry run or executes, for users who may
    change groups."""
    if request.method == "POST":
        return _reset(request, group_id)
    return _reset_page(request, group_id, ResetForm(), None)


def _reset_page(request: HttpRequest, group_id: str, form: ResetForm, plan: Any,
                status: int = 200) -> HttpResponse:
    cluster = ClusterState.current()
    topics = sorted(set(GroupPartitionLag.objects.filter(group_id=group_id)
                        .values_list("topic", flat=True)))
    return render(request, "controlcenter/group_reset.html", {
        "cluster": cluster, "banners": cluster_banners(cluster), "group_id": group_id,
        "group": GroupState.objects.filter(group_id=group_id).first(), "form": form,
        "plan": plan, "topics": topics}, status=status)


@requires(Capability.CHANGE_GROUPS)
def _reset(request: HttpRequest, group_id: str) -> HttpResponse:
    form = ResetForm(request.POST)
    if not form.is_valid():
        return _reset_page(request, group_id, form, None, status=400)
    execute = request.POST.get("execute") == "1"
    try:
        if execute:
            plan = actions.reset_group_offsets(request, group_id, form.spec())
        else:
            plan = actions.preview_group_offsets_reset(group_id, form.spec())
    except actions.ActionError as exc:
        form.add_error(None, str(exc))
        return _reset_page(request, group_id, form, None, status=400)
    if not execute:
        return _reset_page(request, group_id, form, plan)
    messages.success(request, f"Offsets of {group_id} reset ({plan.spec.mode.value}) on "
                              f"{len(plan.partitions)} partitions; the lag shows it with the "
                              "collector's next sample.")
    return redirect("group", group_id=group_id)


@requires(Capability.CHANGE_GROUPS)
def group_delete(request: HttpRequest, group_id: str) -> HttpResponse:
    if request.POST.get("confirm") != group_id:
        messages.error(request, f"Type the group's id ({group_id}) to confirm the deletion.")
        return redirect("group", group_id=group_id)
    try:
        actions.delete_group(request, group_id)
    except actions.ActionError as exc:
        messages.error(request, f"Could not delete {group_id}. {exc}")
        return redirect("group", group_id=group_id)
    messages.success(request, f"Group {group_id} deleted.")
    return redirect("groups")

