"""/api/v1/groups/...: the consumer-group list, one group, its lag history, reset offsets
(dry run or execute) and delete."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlcenter import actions
from controlcenter.access import Capability
from controlcenter.api.base import ControlCenterView, form_errors, refusal
from controlcenter.models import GroupPartitionLag, GroupState
from controlcenter.offsetreset import ResetPlan
from controlcenter.pages import groups as pages


class GroupSerializer(serializers.ModelSerializer[GroupState]):
    type = serializers.CharField(
        source="group_type", read_only=True,
        help_text="the group protocol, as Kafka's GroupType: classic, or consumer (KIP-848)")
    state = serializers.CharField(
        read_only=True,
        help_text="Kafka's GroupState: EMPTY, STABLE, DEAD; PREPARING_REBALANCE, "
                  "COMPLETING_REBALANCE (classic); ASSIGNING, RECONCILING (consumer); "
                  "UNKNOWN when the client cannot name it")

    class Meta:
        model = GroupState
        fields = ["group_id", "type", "state", "status", "members", "reconciling",
                  "protocol_type", "protocol",
                  "coordinator", "topics", "partitions", "total_lag", "max_lag",
                  "max_lag_seconds", "complete", "updated_at"]
        extra_kwargs = {"reconciling": {"help_text": (
            "consumer groups: members that do not own their target assignment yet")}}


class PartitionLagSerializer(serializers.ModelSerializer[GroupPartitionLag]):
    class Meta:
        model = GroupPartitionLag
        fields = ["topic", "partition", "committed_offset", "end_offset", "lag", "lag_seconds",
                  "status", "consumer_id", "client_id", "host", "updated_at"]


class MemberSerializer(serializers.Serializer[Any]):
    consumer_id = serializers.CharField()
    client_id = serializers.CharField()
    host = serializers.CharField()
    assignment = serializers.ListField(child=serializers.CharField(),
                                       help_text="topic-partition names")


class GroupPageSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pages = serializers.IntegerField()
    results = GroupSerializer(many=True)


class GroupDetailSerializer(GroupSerializer):
    members_detail = MemberSerializer(many=True, source="members_list")
    partition_lags = PartitionLagSerializer(many=True)

    class Meta(GroupSerializer.Meta):
        fields = [*GroupSerializer.Meta.fields, "members_detail", "partition_lags"]


class HistorySerializer(serializers.Serializer[Any]):
    t = serializers.ListField(child=serializers.FloatField(), help_text="epoch seconds")
    lag = serializers.ListField(child=serializers.IntegerField(), help_text="total lag")
    seconds = serializers.ListField(child=serializers.FloatField(allow_null=True),
                                    help_text="max lag in seconds (null: unknown)")
    since = serializers.FloatField(help_text="the window's start, epoch seconds")
    until = serializers.FloatField(help_text="the window's end (now), epoch seconds")


class PartitionResetSerializer(serializers.Serializer[Any]):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    current = serializers.IntegerField(allow_null=True)
    target = serializers.IntegerField()
    log_start_offset = serializers.IntegerField()
    log_end_offset = serializers.IntegerField()
    moved = serializers.IntegerField(allow_null=True, help_text="+ skipped, - re-read")
    lag_before = serializers.IntegerField(allow_null=True)
    lag_after = serializers.IntegerField()
    seconds_before = serializers.FloatField(allow_null=True)
    seconds_after = serializers.FloatField(allow_null=True)


class ResetPlanSerializer(serializers.Serializer[Any]):
    group_id = serializers.CharField()
    type = serializers.CharField(help_text="classic or consumer, read with the plan")
    state = serializers.CharField(help_text="read with the plan: only EMPTY or DEAD may reset")
    members = serializers.IntegerField()
    executed = serializers.BooleanField()
    may_execute = serializers.BooleanField()
    refusal = serializers.CharField()
    partitions = PartitionResetSerializer(many=True)


RESET_REQUEST = inline_serializer("ResetOffsetsRequest", {
    "mode": serializers.ChoiceField(choices=[c for c, _ in pages.ResetForm.base_fields[
        "mode"].choices]),  # type: ignore[attr-defined]
    "topic": serializers.CharField(required=False, help_text="omit: all committed topics"),
    "offset": serializers.IntegerField(required=False),
    "shift": serializers.IntegerField(required=False),
    "datetime": serializers.DateTimeField(required=False, help_text="UTC"),
    "duration": serializers.CharField(required=False, help_text="ISO-8601, e.g. PT15M"),
    "dry_run": serializers.BooleanField(default=True),
})


class GroupListView(ControlCenterView):
    @extend_schema(summary="Consumer groups, sorted and paginated on the server",
                   operation_id="groups_list",
                   parameters=[OpenApiParameter("q", str), OpenApiParameter("page", int),
                               OpenApiParameter("sort", str, enum=[
                                   s for k in pages.SORTS for s in (k, f"-{k}")])],
                   responses=GroupPageSerializer)
    def get(self, request: Request) -> Response:
        sort = request.query_params.get("sort", pages.DEFAULT_SORT)
        rows = pages.group_rows(request.query_params.get("q", "").strip(),
                                sort if sort.lstrip("-") in pages.SORTS else pages.DEFAULT_SORT)
        page = Paginator(rows, pages.PER_PAGE).get_page(request.query_params.get("page"))
        return Response({"count": page.paginator.count, "page": page.number,
                         "pages": page.paginator.num_pages,
                         "results": GroupSerializer(list(page), many=True).data})


class GroupView(ControlCenterView):
    capability = Capability.CHANGE_GROUPS

    @extend_schema(summary="One group: members, assignments, per-partition lag",
                   operation_id="group_retrieve",
                   responses=GroupDetailSerializer)
    def get(self, request: Request, group_id: str) -> Response:
        context = pages.group_context(group_id)
        group = context["group"]
        if group is None:
            raise Http404(f"No consumer group {group_id} in the collector's snapshot.")
        group.members_list = context["members"]
        group.partition_lags = context["partitions"]
        return Response(GroupDetailSerializer(group).data)

    @extend_schema(summary="Delete the group and its offsets (refused while it has members)",
                   responses={204: None})
    def delete(self, request: Request, group_id: str) -> Response:
        try:
            actions.delete_group(request._request, group_id)
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response(status=204)


class GroupHistoryView(ControlCenterView):
    @extend_schema(summary="The group's lag history over a window",
                   parameters=[OpenApiParameter("window", str, enum=list(pages.WINDOWS))],
                   responses=HistorySerializer)
    def get(self, request: Request, group_id: str) -> Response:
        window = request.query_params.get("window", pages.DEFAULT_WINDOW)
        return Response(pages.lag_history(group_id, window))


class GroupResetView(ControlCenterView):
    capability = Capability.CHANGE_GROUPS

    @extend_schema(summary="Reset offsets with the kafka-consumer-groups modes: a dry run "
                           "(default) or executed", request=RESET_REQUEST,
                   responses=ResetPlanSerializer)
    def post(self, request: Request, group_id: str) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        form = pages.ResetForm({k: v for k, v in data.items() if v is not None})
        if not form.is_valid():
            raise form_errors(form.errors)
        execute = data.get("dry_run", True) in (False, "false", "0", 0)
        try:
            plan = (actions.reset_group_offsets(request._request, group_id, form.spec())
                    if execute else actions.preview_group_offsets_reset(group_id, form.spec()))
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response(plan_body(plan, execute))


def plan_body(plan: ResetPlan, executed: bool) -> dict[str, Any]:
    rows = [{"topic": p.topic, "partition": p.partition, "current": p.current,
             "target": p.target, "log_start_offset": p.log_start_offset,
             "log_end_offset": p.log_end_offset, "moved": p.moved, "lag_before": p.lag_before,
             "lag_after": p.lag_after, "seconds_before": p.seconds_before,
             "seconds_after": p.seconds_after} for p in plan.partitions]
    return {"group_id": plan.group_id, "type": plan.type.value, "state": plan.state.value,
            "members": plan.members,
            "executed": executed, "may_execute": plan.may_execute, "refusal": plan.refusal,
            "partitions": rows}

