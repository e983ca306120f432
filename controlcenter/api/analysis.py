"""/api/v1/analysis...: launch a lag analysis, list runs, one run, cancel it, its results.

A launch is validated by the job's form (`controlcenter.analysis.jobs`) before anything is
queued: unknown groups or topics, an empty window or impossible parameters answer 400 with
`{"error_code": "INVALID_REQUEST", "message", "fields"}`. A run is its cluster's: the list
answers with the current cluster's runs (`?cluster=<name>` or `all`), a launch is for the
body's `cluster` (else `?cluster=`, else the current one), and a name no configured cluster
has answers 400 `UNKNOWN_CLUSTER`.
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlcenter import actions, clusters
from controlcenter.access import Capability
from controlcenter.analysis import export
from controlcenter.analysis.jobs import JOBS
from controlcenter.api.base import (
    LISTED_CLUSTER,
    ControlCenterError,
    ControlCenterView,
    form_errors,
    listed_cluster,
    refusal,
    target_cluster,
)
from controlcenter.api.jobparams import job_parameter_fields
from controlcenter.models import AnalysisRun

PER_PAGE = 50


class RunSerializer(serializers.ModelSerializer[AnalysisRun]):
    requested_by = serializers.CharField(source="requested_by.username", default=None)
    duration_seconds = serializers.FloatField(allow_null=True, read_only=True)

    class Meta:
        model = AnalysisRun
        fields = ["id", "job", "cluster", "parameters", "status", "cancel_requested", "stages_done",
                  "stages_total", "stages_skipped", "tasks_done", "tasks_total", "master",
                  "created_at", "started_at", "finished_at", "duration_seconds", "error",
                  "requested_by"]


class RunPageSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    results = RunSerializer(many=True)


LAUNCH_REQUEST = inline_serializer("AnalysisLaunchRequest", {
    "job": serializers.ChoiceField(choices=list(JOBS)),
    "cluster": serializers.CharField(required=False, help_text="default: ?cluster=, else the "
                                     "current cluster; one not configured is refused"),
    "window_minutes": serializers.IntegerField(default=60),
    "until": serializers.DateTimeField(required=False, help_text="UTC; default now"),
    **job_parameter_fields(),
})


class AnalysisListView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="Analysis runs, newest first", operation_id="analysis_list",
                   parameters=[OpenApiParameter("page", int), LISTED_CLUSTER],
                   responses=RunPageSerializer)
    def get(self, request: Request) -> Response:
        shown = listed_cluster(request)
        runs = AnalysisRun.objects.select_related("requested_by")
        if shown is not None:
            runs = runs.filter(cluster=shown)
        page = Paginator(runs, PER_PAGE).get_page(request.query_params.get("page"))
        return Response({"count": page.paginator.count, "page": page.number,
                         "pages": page.paginator.num_pages,
                         "results": RunSerializer(list(page.object_list), many=True).data})

    @extend_schema(summary="Launch a job: validated, then queued for a Celery worker",
                   request=LAUNCH_REQUEST, responses={202: RunSerializer})
    def post(self, request: Request) -> Response:
        data = dict(request.data) if isinstance(request.data, dict) else {}
        spec = JOBS.get(str(data.pop("job", "")))
        if spec is None:
            raise ControlCenterError(400, "INVALID_REQUEST",
                                     f"job must be one of: {', '.join(JOBS)}")
        cluster = target_cluster(request, data, clusters.current_name())
        with clusters.using(cluster):  # the job's names are checked on its cluster
            form = spec.form.with_defaults({k: v for k, v in data.items() if v is not None})
            if not form.is_valid():
                raise form_errors(form.errors)
            try:
                run = actions.launch_analysis(request._request, spec.name, form.params(),
                                              cluster=cluster)
            except actions.ActionError as exc:
                raise refusal(exc) from exc
        return Response(RunSerializer(run).data, status=202)


class AnalysisView(ControlCenterView):
    @extend_schema(summary="One run: status, progress, timings, error",
                   operation_id="analysis_retrieve", responses=RunSerializer)
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RunSerializer(_run(run_id)).data)


class AnalysisCancelView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="Cancel a queued or running run", request=None,
                   responses={202: RunSerializer})
    def post(self, request: Request, run_id: int) -> Response:
        run = _run(run_id)
        try:
            actions.cancel_analysis(request._request, run)
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        run.refresh_from_db()
        return Response(RunSerializer(run).data, status=202)


class AnalysisResultsView(ControlCenterView):
    @extend_schema(summary="A finished run's tables and chart series (JSON), or one table "
                           "as CSV", parameters=[
                               OpenApiParameter("format", str, enum=["json", "csv"]),
                               OpenApiParameter("table", str, description="csv only")],
                   responses={200: inline_serializer("AnalysisResult", {
                       "job": serializers.CharField(), "tables": serializers.DictField(),
                       "charts": serializers.DictField()})})
    def get(self, request: Request, run_id: int) -> Response | HttpResponse:
        run = _run(run_id)
        if run.result is None:
            raise ControlCenterError(409 if not run.finished else 404, "NO_RESULT",
                                     f"Run {run.pk} is {run.status}: no result.")
        fmt = request.query_params.get("format", "json")
        if fmt == "json":
            return Response(run.result)
        try:
            return export.download(run, fmt, request.query_params.get("table"))
        except export.NoSuchTable as exc:
            raise ControlCenterError(400, "INVALID_REQUEST", str(exc)) from exc


def _run(run_id: int) -> AnalysisRun:
    run = AnalysisRun.objects.select_related("requested_by").filter(pk=run_id).first()
    if run is None:
        raise Http404(f"No analysis run {run_id}.")
    return run
