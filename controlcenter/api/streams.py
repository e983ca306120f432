"""/api/v1/streams/...: persistent queries (list, create, one, stop, restart, delete) and
ad-hoc queries, what the Streams pages do.

A create is validated in Spark before anything is queued: an unknown topic, a syntax error,
an aggregation without a watermark in append mode answer 400 `{"error_code":
"INVALID_QUERY", "message": "<Spark's message>"}`.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlcenter.access import Capability
from controlcenter.actions import ActionError
from controlcenter.api.base import ControlCenterError, ControlCenterView
from controlcenter.pages.streams import ADHOC_MAX_LIMIT, ADHOC_MAX_TIMEOUT_S
from controlcenter.streams import actions
from controlcenter.streams.models import OutputMode, QueryKind, StreamQuery, ValueFormat

STATUS = {"QUERY_EXISTS": 409, "QUERY_NOT_RUNNING": 409}


class QuerySerializer(serializers.ModelSerializer[StreamQuery]):
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = StreamQuery
        fields = ["name", "kind", "params", "sql", "source_topics", "output_topic", "key_column",
                  "value_format", "output_mode", "state", "stop_requested", "restart_requested",
                  "last_error", "restarts", "spark_query_id", "worker", "started_at", "checkpoint",
                  "created_at", "created_by", "progress"]


class CreateSerializer(serializers.Serializer[Any]):
    """`kind` sql (the default) needs `sql` and `output_topic`; `lag-anomaly` (the built-in
    query over the collector's lag history) takes `params` {k, window, min_history} and
    writes `_millrace-lag-alerts` unless `output_topic` says otherwise."""

    name = serializers.SlugField(max_length=100)
    kind = serializers.ChoiceField(choices=QueryKind.values, default=QueryKind.SQL)
    sql = serializers.CharField(required=False, allow_blank=True, default="")
    params = serializers.DictField(required=False, default=dict)
    output_topic = serializers.CharField(max_length=249, required=False, allow_blank=True,
                                         default="")
    key_column = serializers.CharField(required=False, allow_blank=True, default="")
    value_format = serializers.ChoiceField(choices=ValueFormat.values, default=ValueFormat.JSON)
    output_mode = serializers.ChoiceField(choices=OutputMode.values, default=OutputMode.APPEND)


class AdhocSerializer(serializers.Serializer[Any]):
    sql = serializers.CharField()
    limit = serializers.IntegerField(min_value=1, max_value=ADHOC_MAX_LIMIT, default=100)
    timeout_s = serializers.IntegerField(min_value=1, max_value=ADHOC_MAX_TIMEOUT_S, default=30)


ROWS = inline_serializer("StreamRows", {
    "columns": serializers.ListField(child=serializers.CharField()),
    "rows": serializers.ListField(child=serializers.ListField()),
    "truncated": serializers.BooleanField()})


def _valid(serializer: serializers.Serializer[Any]) -> dict[str, Any]:
    if not serializer.is_valid():
        fields = {k: [str(m) for m in v] for k, v in serializer.errors.items()}
        raise ControlCenterError(400, "INVALID_REQUEST", "; ".join(
            f"{k}: {' '.join(v)}" for k, v in fields.items()), fields)
    return dict(serializer.validated_data)


def _refusal(exc: ActionError) -> ControlCenterError:
    code = exc.code_name or "INVALID_REQUEST"
    return ControlCenterError(STATUS.get(code, 400), code, exc.message)


def _query(name: str) -> StreamQuery:
    query = StreamQuery.objects.select_related("created_by").filter(name=name).first()
    if query is None:
        raise Http404(f"No stream query {name}.")
    return query


class QueryListView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="Persistent stream queries", operation_id="streams_queries_list",
                   responses=QuerySerializer(many=True))
    def get(self, request: Request) -> Response:
        queries = StreamQuery.objects.select_related("created_by")
        return Response(QuerySerializer(list(queries), many=True).data)

    @extend_schema(summary="Validate a query in Spark, then start it (queued for the streams "
                           "worker)", request=CreateSerializer, responses={202: QuerySerializer})
    def post(self, request: Request) -> Response:
        data = _valid(CreateSerializer(data=request.data))
        if data["kind"] == QueryKind.LAG_ANOMALY:
            spec = actions.lag_anomaly_spec(data["name"], data["params"], data["output_topic"])
        elif not data["output_topic"]:
            raise ControlCenterError(400, "INVALID_REQUEST", "output_topic: This field is "
                                     "required.", {"output_topic": ["This field is required."]})
        else:
            spec = actions.QuerySpec(**data)
        try:
            query = actions.create_stream_query(request._request, spec)
        except ActionError as exc:
            raise _refusal(exc) from exc
        return Response(QuerySerializer(query).data, status=202)


class QueryView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="One query: state, failure, latest progress points",
                   operation_id="streams_queries_retrieve", responses=QuerySerializer)
    def get(self, request: Request, name: str) -> Response:
        return Response(QuerySerializer(_query(name)).data)

    @extend_schema(summary="Delete a query and its checkpoint (stopping it)",
                   responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        actions.delete_stream_query(request._request, _query(name))
        return Response(status=204)


class QueryStopView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="Stop a query between batches", request=None,
                   responses={202: QuerySerializer})
    def post(self, request: Request, name: str) -> Response:
        try:
            query = actions.stop_stream_query(request._request, _query(name))
        except ActionError as exc:
            raise _refusal(exc) from exc
        return Response(QuerySerializer(query).data, status=202)


class QueryRestartView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="Restart a query from its checkpoint", request=None,
                   responses={202: QuerySerializer})
    def post(self, request: Request, name: str) -> Response:
        query = actions.restart_stream_query(request._request, _query(name))
        return Response(QuerySerializer(query).data, status=202)


class AdhocView(ControlCenterView):
    capability = Capability.RUN_ANALYSES

    @extend_schema(summary="Run a bounded batch query over the topics (limit, timeout)",
                   request=AdhocSerializer, responses=ROWS)
    def post(self, request: Request) -> Response:
        data = _valid(AdhocSerializer(data=request.data))
        try:
            rows = actions.run_adhoc_query(request._request, data["sql"], data["limit"],
                                           float(data["timeout_s"]))
        except ActionError as exc:
            raise _refusal(exc) from exc
        return Response({"columns": rows.columns, "rows": rows.rows,
                         "truncated": rows.truncated})


def urlpatterns_for(view: Any) -> list[Any]:
    from django.urls import path

    return [
        path("streams/queries", view(QueryListView), name="api-streams"),
        path("streams/queries/<slug:name>/stop", view(QueryStopView), name="api-stream-stop"),
        path("streams/queries/<slug:name>/restart", view(QueryRestartView),
             name="api-stream-restart"),
        path("streams/queries/<slug:name>", view(QueryView), name="api-stream"),
        path("streams/adhoc", view(AdhocView), name="api-streams-adhoc"),
    ]
