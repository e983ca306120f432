"""The Analytics pages: the runs list and the jobs to launch, a job's launch form, a run
(live progress bar, cancel, results as tables and uPlot charts), its downloads, schedules.

Runs and results come from `AnalysisRun` rows; pages never call Spark. Launching and
cancelling go through `actions` and need the `run_analyses` permission. The lists show the
current cluster's runs and schedules (`?cluster=all`: every cluster's, pages/scope.py); the
launch form carries the cluster it was shown for, and launches there or nowhere.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from controlcenter import actions, clusters
from controlcenter.access import Capability, requires
from controlcenter.analysis import execute, export
from controlcenter.analysis.jobs import JOBS, JobSpec
from controlcenter.analysis.schedules import MAX_EVERY_MINUTES, ScheduleSpec
from controlcenter.models import AnalysisRun, AnalysisSchedule
from controlcenter.pages import scope

PER_PAGE = 25


def analytics(request: HttpRequest) -> HttpResponse:
    shown = scope.shown_cluster(request)
    runs = scope.of_cluster(AnalysisRun.objects.select_related("requested_by"), shown)
    page = Paginator(runs, PER_PAGE).get_page(request.GET.get("page"))
    # Schedules of a cluster the platform no longer watches: only every cluster's list shows
    # them, and their launches fail; the page says where they are.
    stranded = AnalysisSchedule.objects.exclude(
        cluster__in=[c.name for c in clusters.configured()]).values_list("cluster", flat=True)
    return render(request, "controlcenter/analytics.html", {
        "page": page, "jobs": JOBS.values(), **scope.context(shown),
        "schedules": scope.of_cluster(AnalysisSchedule.objects.all(), shown),
        "stranded": sorted(set(stranded))})


class ClusterChoice(forms.Form):
    """The cluster the launch page was shown for: the run (and schedule) is that cluster's
    even when the session has switched since, and one no longer configured is refused."""

    cluster = forms.CharField(widget=forms.HiddenInput, required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            data["cluster"] = clusters.checked(data.get("cluster") or clusters.current_name())
        except clusters.UnknownCluster as exc:
            raise forms.ValidationError(
                f"{exc} Nothing was launched or scheduled: choose a cluster with the "
                "switcher and launch again.") from exc
        return data


class ScheduleForm(forms.Form):
    schedule_name = forms.SlugField(required=False, max_length=100, label="Schedule name",
                                    help_text="To launch it again every interval (Celery beat).")
    every_minutes = forms.IntegerField(required=False, min_value=1, max_value=MAX_EVERY_MINUTES,
                                       label="Every (minutes)")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if bool(data.get("schedule_name")) != bool(data.get("every_minutes")):
            raise forms.ValidationError("A schedule needs both a name and an interval.")
        return data


def analysis_new(request: HttpRequest, job: str) -> HttpResponse:
    """GET shows the job's form to anyone; POST launches, for users who may run analyses."""
    spec = _spec(job)
    if request.method == "POST":
        return _launch(request, spec)
    return _form_page(request, spec, spec.form(), ScheduleForm(),
                      ClusterChoice(initial={"cluster": clusters.current_name()}))


def _form_page(request: HttpRequest, spec: JobSpec, form: Any, schedule: ScheduleForm,
               choice: ClusterChoice, status: int = 200) -> HttpResponse:  # fmt: skip
    return render(request, "controlcenter/analysis_new.html", {
        "spec": spec, "form": form.offer_names(), "schedule": schedule, "choice": choice,
        "cluster_name": clusters.current_name()}, status=status)


@requires(Capability.RUN_ANALYSES)
def _launch(request: HttpRequest, spec: JobSpec) -> HttpResponse:
    choice = ClusterChoice(request.POST)
    if not choice.is_valid():  # the job's names cannot be checked on no cluster
        posted = {k: v if len(v) > 1 else v[0] for k, v in request.POST.lists()}
        return _form_page(request, spec, spec.form(initial=posted),
                          ScheduleForm(request.POST), choice, status=400)
    with clusters.using(choice.cleaned_data["cluster"]):
        return _launch_on(request, spec, choice)


def _launch_on(request: HttpRequest, spec: JobSpec, choice: ClusterChoice) -> HttpResponse:
    form, schedule = spec.form(request.POST), ScheduleForm(request.POST)
    if not (form.is_valid() and schedule.is_valid()):
        return _form_page(request, spec, form, schedule, choice, status=400)
    name, cluster = schedule.cleaned_data.get("schedule_name"), choice.cleaned_data["cluster"]
    if name:
        actions.save_analysis_schedule(request, ScheduleSpec.of(
            name, spec.name, form, schedule.cleaned_data["every_minutes"], cluster))
        messages.success(request, f"Schedule {name} saved: {spec.title} every "
                                  f"{schedule.cleaned_data['every_minutes']} minutes on "
                                  f"{cluster}.")
    run = actions.launch_analysis(request, spec.name, form.params(), cluster=cluster)
    return redirect("analysis-run", run_id=run.pk)


def analysis_run(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(AnalysisRun.objects.select_related("requested_by", "schedule"),
                            pk=run_id)
    charts = (run.result or {}).get("charts") or {}
    spec = JOBS.get(run.job)
    return render(request, "controlcenter/analysis_run.html", {
        "run": run, "spec": spec, "window": _window(run.parameters),
        "parameters": _parameters(run.parameters, spec),
        "tables": export.tables(run.result), "charts": charts,
        "chart_titles": [(name, export.title(name)) for name in charts],
        "status_id": execute.status_element_id(run)})


def analysis_status(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's status fragment alone: what a page fetches when its socket (re)connects,
    so a change pushed before it listened is not missed."""
    run = get_object_or_404(AnalysisRun, pk=run_id)
    return render(request, execute.STATUS_TEMPLATE, {"run": run})


@requires(Capability.RUN_ANALYSES)
def analysis_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(AnalysisRun, pk=run_id)
    try:
        status = actions.cancel_analysis(request, run)
    except actions.ActionError as exc:
        messages.error(request, str(exc))
    else:
        done = status == "CANCELLED"
        messages.info(request, f"Run {run.pk}: " + (
            "cancelled." if done else "cancelling; its Spark job is being stopped."))
    return redirect("analysis-run", run_id=run.pk)


def analysis_download(request: HttpRequest, run_id: int, fmt: str) -> HttpResponse:
    """The run's result as JSON (everything) or one table as CSV (`?table=`)."""
    run = get_object_or_404(AnalysisRun, pk=run_id)
    if run.result is None:
        raise Http404("This run has no result.")
    try:
        return export.download(run, fmt, request.GET.get("table"))
    except export.NoSuchTable as exc:
        raise Http404(str(exc)) from exc


@requires(Capability.RUN_ANALYSES)
def schedule_delete(request: HttpRequest, schedule_id: int) -> HttpResponse:
    schedule = get_object_or_404(AnalysisSchedule, pk=schedule_id)
    actions.delete_analysis_schedule(request, schedule)
    messages.info(request, f"Schedule {schedule.name} deleted.")
    return redirect("analytics")


@requires(Capability.RUN_ANALYSES)
def schedule_enable(request: HttpRequest, schedule_id: int, enabled: bool) -> HttpResponse:
    schedule = get_object_or_404(AnalysisSchedule, pk=schedule_id)
    actions.enable_analysis_schedule(request, schedule, enabled)
    messages.info(request, f"Schedule {schedule.name} " + ("resumed." if enabled else "paused."))
    return redirect("analytics")


def _spec(job: str) -> JobSpec:
    spec = JOBS.get(job)
    if spec is None:
        raise Http404(f"No job {job!r}.")
    return spec


def _window(params: dict[str, Any]) -> tuple[str, str, str] | None:
    """The analysed window as people read it: its start, its end (with the date only when
    it differs) and its length in minutes."""
    try:
        since, until = float(params["since"]), float(params["until"])
    except (KeyError, TypeError, ValueError):
        return None
    start, end = dt.datetime.fromtimestamp(since, dt.UTC), dt.datetime.fromtimestamp(until, dt.UTC)
    end_format = "%H:%M:%S" if start.date() == end.date() else "%Y-%m-%d %H:%M:%S"
    minutes = f"{(until - since) / 60:.1f}".removesuffix(".0")
    return f"{start:%Y-%m-%d %H:%M:%S}", end.strftime(end_format), minutes


def _parameters(params: dict[str, Any], spec: JobSpec | None) -> list[tuple[str, str]]:
    """The job's parameters under their launch form's labels (the window is shown apart)."""
    fields = spec.form.base_fields if spec else {}
    shown = []
    for name, value in params.items():
        if name in ("since", "until"):
            continue
        field = fields.get(name)
        label = str(field.label) if field is not None and field.label else name
        shown.append((label, ", ".join(map(str, value)) if isinstance(value, list) else str(value)))
    return shown

