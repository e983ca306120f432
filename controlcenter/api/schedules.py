"""/api/v1/analysis/schedules...: the analysis schedules Celery beat launches.

List and create, read, replace (PUT) or change (PATCH), delete, enable and disable. A
schedule's values are checked by the job's launch form plus its name and interval
(`controlcenter.analysis.schedules`), exactly as the page checks them: unknown groups or
topics and impossible values answer 400 `{"error_code": "INVALID_REQUEST", "message",
"fields"}`; a name in use answers 409 `SCHEDULE_EXISTS`. Changes need `run_analyses` and are
audited (`analysis.schedule.*`) through `actions`. A schedule is its cluster's: the list
answers with the current cluster's (`?cluster=<name>` or `all`); a new one is for the
body's `cluster` (else `?cluster=`, else the current one), a changed one keeps its own unless
the body names another; a name no configured cluster has answers 400 `UNKNOWN_CLUSTER`.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlcenter import actions, clusters
from controlcenter.access import Capability
from controlcenter.analysis.jobs import JOBS, MAX_WINDOW_MINUTES
from controlcenter.analysis.schedules import (
    MAX_EVERY_MINUTES,
    ScheduleSpec,
    current_values,
    schedule_form,
    spec_of,
)
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
from controlcenter.models import AnalysisSchedule


class ScheduleSerializer(serializers.ModelSerializer[AnalysisSchedule]):
    created_by = serializers.CharField(source="created_by.username", default=None)
    next_launch_at = serializers.DateTimeField(allow_null=True, read_only=True,
                                               help_text="null while disabled")
    runs = serializers.IntegerField(source="runs.count", read_only=True,
                                    help_text="runs it launched that still exist")

    class Meta:
        model = AnalysisSchedule
        fields = ["id", "name", "job", "cluster", "parameters", "window_minutes", "every_minutes",
                  "enabled", "last_launched_at", "next_launch_at", "runs", "created_by"]


def _request_serializer(name: str, required: bool) -> Any:
    return inline_serializer(name, {
        "name": serializers.SlugField(max_length=100, required=required),
        "job": serializers.ChoiceField(choices=list(JOBS), required=required),
        "cluster": serializers.CharField(required=False, help_text=(
            "default: ?cluster=, else the current cluster for a new schedule and its own "
            "for a changed one; one not configured is refused")),
        "window_minutes": serializers.IntegerField(
            min_value=1, max_value=MAX_WINDOW_MINUTES, required=False,
            help_text="each launch analyses the last this many minutes (default 60)"),
        "every_minutes": serializers.IntegerField(min_value=1, max_value=MAX_EVERY_MINUTES,
                                                  required=required),
        **job_parameter_fields(),
    })


CREATE_REQUEST = _request_serializer("AnalysisScheduleRequest", required=True)
PATCH_REQUEST = _request_serializer("AnalysisSchedulePatch", required=False)
ERROR = inline_serializer("AnalysisScheduleError", {
    "error_code": serializers.CharField(), "message": serializers.CharField(),
    "fields": serializers.DictField(required=False)})


class ScheduleListView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="Analysis schedules, by name", operation_id="analysis_schedules",
                   parameters=[LISTED_CLUSTER], responses=ScheduleSerializer(many=True))
    def get(self, request: Request) -> Response:
        shown = listed_cluster(request)
        schedules = AnalysisSchedule.objects.select_related("created_by")
        if shown is not None:
            schedules = schedules.filter(cluster=shown)
        return Response(ScheduleSerializer(list(schedules), many=True).data)

    @extend_schema(summary="Create a schedule: the job every N minutes over the last M",
                   request=CREATE_REQUEST,
                   responses={201: ScheduleSerializer, 400: ERROR, 409: ERROR})
    def post(self, request: Request) -> Response:
        spec = _validated(request, _body(request), clusters.current_name())
        try:
            schedule = actions.create_analysis_schedule(request._request, spec)
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response(ScheduleSerializer(schedule).data, status=201)


class ScheduleView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="One schedule", operation_id="analysis_schedule_retrieve",
                   responses=ScheduleSerializer)
    def get(self, request: Request, schedule_id: int) -> Response:
        return Response(ScheduleSerializer(_schedule(schedule_id)).data)

    @extend_schema(summary="Replace a schedule's values (omitted job fields take their "
                           "defaults)", request=CREATE_REQUEST,
                   responses={200: ScheduleSerializer, 400: ERROR, 409: ERROR})
    def put(self, request: Request, schedule_id: int) -> Response:
        return self._update(request, _schedule(schedule_id), {})

    @extend_schema(summary="Change some of a schedule's values", request=PATCH_REQUEST,
                   responses={200: ScheduleSerializer, 400: ERROR, 409: ERROR})
    def patch(self, request: Request, schedule_id: int) -> Response:
        schedule = _schedule(schedule_id)
        return self._update(request, schedule, current_values(schedule))

    @extend_schema(summary="Delete a schedule (the runs it launched stay)",
                   responses={204: None})
    def delete(self, request: Request, schedule_id: int) -> Response:
        actions.delete_analysis_schedule(request._request, _schedule(schedule_id))
        return Response(status=204)

    def _update(self, request: Request, schedule: AnalysisSchedule,
                start: dict[str, Any]) -> Response:  # fmt: skip
        spec = _validated(request, {**start, **_body(request)}, schedule.cluster)
        try:
            actions.update_analysis_schedule(request._request, schedule, spec)
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response(ScheduleSerializer(schedule).data)


class ScheduleEnableView(ControlCenterView):
    capability = Capability.RUN_ANALYSES
    enabled = True

    @extend_schema(summary="Resume a schedule: beat launches it when due",
                   operation_id="analysis_schedule_enable", request=None,
                   responses=ScheduleSerializer)
    def post(self, request: Request, schedule_id: int) -> Response:
        schedule = actions.enable_analysis_schedule(request._request, _schedule(schedule_id),
                                                    self.enabled)
        return Response(ScheduleSerializer(schedule).data)


class ScheduleDisableView(ScheduleEnableView):
    enabled = False

    @extend_schema(summary="Pause a schedule: beat skips it until enabled",
                   operation_id="analysis_schedule_disable", request=None,
                   responses=ScheduleSerializer)
    def post(self, request: Request, schedule_id: int) -> Response:
        return super().post(request, schedule_id)


def _body(request: Request) -> dict[str, Any]:
    return {k: v for k, v in request.data.items() if v is not None} \
        if isinstance(request.data, dict) else {}


def _validated(request: Request, data: dict[str, Any], cluster: str) -> ScheduleSpec:
    """The spec of `data`, checked on its cluster (`data`'s, else `cluster`)."""
    cluster = target_cluster(request, data, cluster)
    with clusters.using(cluster):
        return _checked(data, cluster)


def _checked(data: dict[str, Any], cluster: str) -> ScheduleSpec:
    job = str(data.pop("job", ""))
    spec = JOBS.get(job)
    if spec is None:
        raise ControlCenterError(400, "INVALID_REQUEST", f"job must be one of: {', '.join(JOBS)}",
                                 {"job": [{"message": f"Unknown job {job!r}.",
                                           "code": "invalid_choice"}]})
    form = schedule_form(spec, data)
    if not form.is_valid():
        raise form_errors(form.errors)
    return spec_of(form, spec.name, cluster)


def _schedule(schedule_id: int) -> AnalysisSchedule:
    schedule = AnalysisSchedule.objects.select_related("created_by").filter(
        pk=schedule_id).first()
    if schedule is None:
        raise Http404(f"No analysis schedule {schedule_id}.")
    return schedule
