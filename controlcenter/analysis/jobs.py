"""The jobs a user can launch, each with the form that validates its parameters.

The names are `laganalysis.jobs.JOBS`'s; this module only knows what the control center asks
for and checks BEFORE anything is queued (issue 11, "Bad input"): groups and topics that
exist, a window that is not empty, thresholds and factors that can mean something. The
cleaned form becomes the job's `params` (laganalysis/README.md); the cluster's bootstrap
servers are added when the run starts.

The same forms serve the launch page and `/api/v1/analysis` (lists may come as JSON
arrays or as comma-separated text).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django import forms
from django.utils import timezone

from clusterclient import ClusterRequestError, ClusterUnavailable
from controlcenter import connection
from controlcenter.models import GroupLagHistory, GroupState, TopicState

MAX_WINDOW_MINUTES = 31 * 24 * 60
_SPLIT = re.compile(r"[\s,]+")


def group_names() -> list[str]:
    """The groups the collector has seen, to offer on the launch page."""
    return list(GroupState.objects.order_by("group_id").values_list("group_id", flat=True))


def topic_names() -> list[str]:
    """The cluster's topics but its internal ones, to offer on the launch page."""
    return list(TopicState.objects.filter(internal=False).order_by("name")
                .values_list("name", flat=True))


class NamesInput(forms.TextInput):
    """Typed names, or the several values a multiple choice posts (the launch page's)."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name)


class NameListField(forms.Field):
    """Names separated by commas or whitespace (a JSON list from the API is joined first).

    On the launch page it offers the names the cluster has (`offer`, from the read model) as
    a multiple choice; it still takes any name, so one that appeared since the collector's
    last cycle is checked against the cluster by the form's own validation."""

    widget: type[forms.Widget] | forms.Widget = NamesInput

    def __init__(self, *, offer: Callable[[], list[str]] | None = None, **kwargs: Any) -> None:
        self.offer = offer
        super().__init__(**kwargs)

    def offer_choices(self) -> None:
        names = self.offer() if self.offer else []
        if names:
            self.widget = forms.SelectMultiple(choices=[(n, n) for n in names],
                                               attrs={"size": min(10, max(4, len(names)))})
            self.help_text = "Ctrl-click (⌘-click) to choose several."

    def to_python(self, value: Any) -> list[str]:
        if value in (None, "", []):
            return []
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        names = [n for n in _SPLIT.split(str(value)) if n]
        return list(dict.fromkeys(names))

    def prepare_value(self, value: Any) -> Any:
        if isinstance(self.widget, forms.SelectMultiple):
            return self.to_python(value)
        return ", ".join(value) if isinstance(value, (list, tuple)) else value


class JobForm(forms.Form):
    """The window every job reads: the last `window_minutes` before `until` (default now)."""

    NOT_JOB_FIELDS: tuple[str, ...] = ("window_minutes", "until")  # not passed to the job
    window_minutes = forms.IntegerField(
        initial=60, min_value=1, max_value=MAX_WINDOW_MINUTES, label="Window (minutes)",
        help_text="How much history to analyse, ending at 'until'.")
    until = forms.DateTimeField(required=False, label="Until (UTC)",
                                help_text="Empty: now. Format 2026-01-31 14:00.")

    @classmethod
    def with_defaults(cls, data: Mapping[str, Any]) -> JobForm:
        """The form over `data` with the fields it omits at their initial values (the API:
        a caller names only what differs from the page's defaults)."""
        defaults = {n: f.initial for n, f in cls.base_fields.items() if f.initial is not None}
        return cls({**defaults, **data})

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        until = data.get("until") or timezone.now()
        if timezone.is_naive(until):
            until = timezone.make_aware(until, dt.UTC)
        minutes = data.get("window_minutes")
        if minutes is not None:
            since = until - dt.timedelta(minutes=minutes)
            if since >= until:
                raise forms.ValidationError("The window is empty.")
            data["since_ts"], data["until_ts"] = since.timestamp(), until.timestamp()
        return data

    def params(self) -> dict[str, Any]:
        """What laganalysis.run receives (without `bootstrap`)."""
        data = self.cleaned_data
        params: dict[str, Any] = {"since": data["since_ts"], "until": data["until_ts"]}
        for name in self.job_fields():
            value = data.get(name)
            if value not in (None, "", []):
                params[name] = value
        return params

    def job_fields(self) -> list[str]:
        return [n for n in self.fields if n not in self.NOT_JOB_FIELDS]

    def offer_names(self) -> JobForm:
        """For the launch page: name fields offer the cluster's groups or topics."""
        for field in self.fields.values():
            if isinstance(field, NameListField):
                field.offer_choices()
        return self


class GroupsForm(JobForm):
    groups = NameListField(
        offer=group_names, required=False, label="Consumer groups",
        help_text="Comma-separated; empty: every group with history in the window.")

    def clean_groups(self) -> list[str]:
        groups: list[str] = self.cleaned_data["groups"]
        unknown = sorted(set(groups) - known_groups(groups))
        if unknown:
            raise forms.ValidationError(f"Unknown consumer group(s): {', '.join(unknown)}.")
        return groups


class LagSummaryForm(GroupsForm):
    bucket_s = forms.IntegerField(initial=60, min_value=1, max_value=86400,
                                  label="Chart bucket (seconds)")


class EtaForm(GroupsForm):
    pass


class SlaForm(GroupsForm):
    threshold_s = forms.FloatField(
        initial=300, min_value=0.001, label="SLA threshold (seconds)",
        help_text="A minute breaches when the lag in seconds exceeds it.")
    objective = forms.FloatField(
        initial=0.99, label="Objective",
        help_text="The fraction of minutes that must meet the SLA, e.g. 0.99.")

    def clean_objective(self) -> float:
        objective: float = self.cleaned_data["objective"]
        if not 0 < objective < 1:
            raise forms.ValidationError("The objective must be between 0 and 1, e.g. 0.99.")
        return objective


class AnomaliesForm(GroupsForm):
    z = forms.FloatField(initial=3.0, min_value=0.001, label="Deviations (z)")
    min_history = forms.IntegerField(initial=2, min_value=1, max_value=1000,
                                     label="Hours of history needed to compare")


class CorrelationForm(GroupsForm):
    min_jump = forms.IntegerField(initial=100, min_value=1, label="Lag jump (offsets)")
    within_s = forms.FloatField(initial=60, min_value=0.001, max_value=86400,
                                label="Event at most this long before (seconds)")


class HotPartitionsForm(JobForm):
    topics = NameListField(offer=topic_names, label="Topics",
                           help_text="Comma-separated topic names.")
    hot_factor = forms.FloatField(
        initial=1.5, min_value=1.0, label="Hot factor",
        help_text="A partition is hot at this many times its topic's mean.")
    top_keys = forms.IntegerField(initial=20, min_value=1, max_value=1000, label="Top keys")

    def clean_topics(self) -> list[str]:
        topics: list[str] = self.cleaned_data["topics"]
        if not topics:
            raise forms.ValidationError("Name at least one topic.")
        unknown = sorted(set(topics) - known_topics(topics))
        if unknown:
            raise forms.ValidationError(f"Unknown topic(s): {', '.join(unknown)}.")
        return topics


@dataclass(frozen=True)
class JobSpec:
    name: str  # laganalysis.jobs.JOBS key
    title: str
    description: str
    form: type[JobForm]


JOBS: dict[str, JobSpec] = {spec.name: spec for spec in (
    JobSpec("lag_summary", "Lag summary",
            "Lag in offsets and seconds (min, avg, p95, max) per partition and the time in "
            "each Burrow status.", LagSummaryForm),
    JobSpec("eta", "Catch-up ETA and skew",
            "When each group and partition catches up from its consume and produce rates, "
            "with the skew of lag across partitions (max/mean, Gini).", EtaForm),
    JobSpec("sla", "SLA breaches",
            "Minutes over a lag-in-seconds threshold and the error budget left.", SlaForm),
    JobSpec("hot_partitions", "Hot partitions and key skew",
            "Messages and bytes per partition and per key, from the topics' data.",
            HotPartitionsForm),
    JobSpec("anomalies", "Anomalies",
            "Hours whose lag is far above the same hour of day and day of week.", AnomaliesForm),
    JobSpec("correlation", "Lag jumps and cluster events",
            "Lag jumps matched to rebalances, leader changes, under-replication and broker "
            "restarts.", CorrelationForm),
)}  # fmt: skip


def known_groups(names: Iterable[str]) -> set[str]:
    """Which of `names` the platform knows: in the read model, in its history, or on the
    cluster (a group that appeared since the collector's last cycle)."""
    wanted = set(names)
    known = set(GroupState.objects.filter(group_id__in=wanted).values_list("group_id", flat=True))
    known |= set(GroupLagHistory.objects.filter(group_id__in=wanted - known)
                 .values_list("group_id", flat=True).distinct())
    if wanted - known:
        # A cluster that does not answer leaves them unknown; the form says so.
        with contextlib.suppress(ClusterUnavailable, ClusterRequestError):
            known |= {g.group_id for g in connection.cluster().list_groups()} & wanted
    return known


def known_topics(names: Iterable[str]) -> set[str]:
    wanted = set(names)
    known = set(TopicState.objects.filter(name__in=wanted).values_list("name", flat=True))
    if wanted - known:
        with contextlib.suppress(ClusterUnavailable, ClusterRequestError):
            known |= set(connection.cluster().metadata(refresh=True).topics) & wanted
    return known
