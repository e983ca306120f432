"""The JSON API of the cluster pages: cluster health, brokers (and their process commands),
topics (list, create, delete, partitions, configs) and messages (browse, produce).

Reads come from the collector's tables like the pages; configs and messages are read on
demand through clusterclient. Writes call `controlcenter.actions`, so they are audited and
announced like the pages' forms. Errors are `{"error_code": NAME, "message": ...}` with the
Kafka error name (400 for a refusal, 503 when the cluster or supervisor did not answer).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.db.models import F
from django.http import Http404
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusterclient import ClusterRequestError, ClusterUnavailable
from controlcenter import actions, connection
from controlcenter.access import Capability
from controlcenter.api.access import AUTHENTICATION, PagesRules
from controlcenter.api.base import ControlCenterError
from controlcenter.messagecodec import EncodeError, encode
from controlcenter.models import BrokerState, ClusterState, PartitionState, TopicState
from controlcenter.pages import messages as message_page
from controlcenter.pages import topics as topic_page
from controlcenter.pages.brokers import broker_configs

UNAVAILABLE = {"UNAVAILABLE", "NO_SUPERVISOR"}


def error(code: str, message: str, status_code: int = 400) -> ControlCenterError:
    return ControlCenterError(status_code, code, message)


def action_error(exc: actions.ActionError) -> ControlCenterError:
    code = exc.code_name or "ERROR"
    raise error(code, exc.message, 503 if code in UNAVAILABLE else 400)


class ClusterSerializer(serializers.ModelSerializer[ClusterState]):
    class Meta:
        model = ClusterState
        exclude = ["id"]


class BrokerSerializer(serializers.ModelSerializer[BrokerState]):
    class Meta:
        model = BrokerState
        exclude = ["id"]


class TopicSerializer(serializers.ModelSerializer[TopicState]):
    class Meta:
        model = TopicState
        exclude = ["id"]


class PartitionSerializer(serializers.ModelSerializer[PartitionState]):
    class Meta:
        model = PartitionState
        exclude = ["id", "topic"]


class ConfigSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    value = serializers.CharField(allow_null=True)
    # Kafka's name for the field, though DRF's Field also has a `source` attribute.
    source = serializers.CharField()  # type: ignore[assignment]
    is_default = serializers.BooleanField()
    is_read_only = serializers.BooleanField()
    is_sensitive = serializers.BooleanField()


class Base(APIView):
    authentication_classes = AUTHENTICATION
    permission_classes = [PagesRules]
    capability: Capability | None = None


class ClusterView(Base):
    @extend_schema(responses=ClusterSerializer, summary="Cluster health, from the collector")
    def get(self, request: Request) -> Response:
        cluster = ClusterState.current()
        if cluster is None:
            raise error("NO_SNAPSHOT", "The collector has not completed a cycle yet.", 503)
        return Response(ClusterSerializer(cluster).data)


class BrokerList(Base):
    @extend_schema(responses=BrokerSerializer(many=True), summary="Every broker")
    def get(self, request: Request) -> Response:
        return Response(BrokerSerializer(BrokerState.objects.all(), many=True).data)


class BrokerDetail(Base):
    @extend_schema(summary="One broker with its configs (read from it on demand)",
                   responses=inline_serializer("BrokerDetail", {
                       "broker": BrokerSerializer(), "configs": ConfigSerializer(many=True),
                       "configs_error": serializers.CharField()}))
    def get(self, request: Request, node_id: int) -> Response:
        row = BrokerState.objects.filter(node_id=node_id).first()
        if row is None:
            raise Http404
        configs, problem = broker_configs(row)
        return Response({"broker": BrokerSerializer(row).data,
                         "configs": ConfigSerializer(configs, many=True).data,
                         "configs_error": problem})


class BrokerCommandView(Base):
    capability = Capability.OPERATE_CLUSTER

    @extend_schema(request=None, summary="Stop, kill, start or restart a broker of the "
                                         "built-in cluster (its supervisor)",
                   parameters=[OpenApiParameter("command", str, OpenApiParameter.PATH,
                                                enum=[c.value for c in actions.BrokerCommand])],
                   responses=inline_serializer("BrokerProcess", {
                       "node_id": serializers.IntegerField(),
                       "state": serializers.CharField(), "pid": serializers.IntegerField()}))
    def post(self, request: Request, node_id: int, command: str) -> Response:
        try:
            chosen = actions.BrokerCommand(command)
        except ValueError:
            raise error("UNKNOWN_COMMAND", f"No broker command {command!r}.", 404) from None
        try:
            process = actions.operate_broker(request.user, node_id, chosen)
        except actions.ActionError as exc:
            raise action_error(exc) from exc
        return Response({"node_id": process.node_id, "state": process.state_text,
                         "pid": process.pid})


class ElectLeaders(Base):
    capability = Capability.OPERATE_CLUSTER

    @extend_schema(request=None, summary="Preferred-leader election for a topic, or for every "
                                         "topic (POST /api/v1/brokers/elect-leaders)",
                   responses=inline_serializer("Election", {
                       "not_moved": serializers.IntegerField()}))
    def post(self, request: Request, name: str | None = None) -> Response:
        try:
            refused = actions.elect_preferred_leaders(request.user, name)
        except actions.ActionError as exc:
            raise action_error(exc) from exc
        return Response({"not_moved": refused})


class TopicPages(PageNumberPagination):
    page_size = topic_page.PER_PAGE
    page_size_query_param = "page_size"
    max_page_size = 500


class CreateTopicSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=249)
    partitions = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    replication_factor = serializers.IntegerField(min_value=1, required=False,
                                                  allow_null=True)
    configs = serializers.DictField(child=serializers.CharField(), required=False)
    # In the answer: what the caller should know, e.g. that acks=all writes will fail.
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)


class TopicList(Base):
    capability = Capability.CHANGE_TOPICS

    @extend_schema(summary="Topics: search (q), sort, server-side pages",
                   parameters=[OpenApiParameter("q", str), OpenApiParameter("sort", str),
                               OpenApiParameter("internal", bool),
                               OpenApiParameter("page", int)],
                   responses=TopicSerializer(many=True))
    def get(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        sort = request.query_params.get("sort", "name")
        internal = request.query_params.get("internal") in ("1", "true")
        rows = topic_page.search_topics(query, internal)
        column = F(topic_page.SORTS.get(sort.lstrip("-"), "name"))
        order = column.desc(nulls_last=True) if sort.startswith("-") else column.asc()
        paginator = TopicPages()
        page = paginator.paginate_queryset(rows.order_by("internal", order, "name"), request,
                                           view=self)
        return paginator.get_paginated_response(TopicSerializer(page, many=True).data)

    @extend_schema(request=CreateTopicSerializer, responses={201: CreateTopicSerializer},
                   summary="Create a topic (the broker validates name, counts and configs)")
    def post(self, request: Request) -> Response:
        body = CreateTopicSerializer(data=request.data)
        if not body.is_valid():
            raise error("INVALID_REQUEST", str(body.errors))
        data = body.validated_data
        try:
            shortfall = actions.create_topic(request.user, data["name"], data.get("partitions"),
                                             data.get("replication_factor"),
                                             data.get("configs") or {})
        except actions.ActionError as exc:
            raise action_error(exc) from exc
        warnings = [shortfall.message] if shortfall is not None else []
        return Response({**data, "warnings": warnings}, status=status.HTTP_201_CREATED)


class TopicDetail(Base):
    capability = Capability.CHANGE_TOPICS

    @extend_schema(summary="One topic with its partitions (leader, replicas, ISR, offsets)",
                   responses=inline_serializer("TopicDetail", {
                       "topic": TopicSerializer(),
                       "partitions": PartitionSerializer(many=True)}))
    def get(self, request: Request, name: str) -> Response:
        row = TopicState.objects.filter(name=name).first()
        if row is None:
            raise error("UNKNOWN_TOPIC_OR_PART", f"No topic {name} in the collector's "
                                                  "snapshot.", 404)
        partitions = PartitionState.objects.filter(topic=name)
        return Response({"topic": TopicSerializer(row).data,
                         "partitions": PartitionSerializer(partitions, many=True).data})

    @extend_schema(summary="Delete a topic", responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        try:
            actions.delete_topic(request.user, name)
        except actions.ActionError as exc:
            raise action_error(exc) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConfigChangeSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=255)
    value = serializers.CharField(allow_null=True, required=False,
                                  help_text="null or absent: reset to the default")


class TopicConfigs(Base):
    capability = Capability.CHANGE_TOPICS

    @extend_schema(summary="A topic's configs with their sources (read on demand)",
                   responses=ConfigSerializer(many=True))
    def get(self, request: Request, name: str) -> Response:
        try:
            configs = connection.cluster().topic_configs(name)
        except ClusterRequestError as exc:
            raise error(exc.code_name, exc.message) from exc
        except ClusterUnavailable as exc:
            raise error("UNAVAILABLE", exc.message, 503) from exc
        return Response(ConfigSerializer(configs, many=True).data)

    @extend_schema(request=ConfigChangeSerializer, responses={204: None},
                   summary="Set one config, or reset it to its default (value null)")
    def post(self, request: Request, name: str) -> Response:
        body = ConfigChangeSerializer(data=request.data)
        if not body.is_valid():
            raise error("INVALID_REQUEST", str(body.errors))
        config, value = body.validated_data["name"], body.validated_data.get("value")
        try:
            if value is None:
                actions.reset_topic_config(request.user, name, config)
            else:
                actions.set_topic_config(request.user, name, config, value)
        except actions.ActionError as exc:
            raise action_error(exc) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProduceSerializer(serializers.Serializer[Any]):
    key = serializers.CharField(required=False, allow_null=True)
    value = serializers.CharField(required=False, allow_null=True,
                                  help_text="UTF-8 text, JSON with a subject or schema_id, "
                                            "or base64 with encoding=base64")
    encoding = serializers.ChoiceField(["text", "base64"], default="text")
    headers = serializers.DictField(child=serializers.CharField(), required=False)
    partition = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    subject = serializers.CharField(required=False, allow_blank=True,
                                    help_text="encode the value with this subject's latest "
                                              "schema (Avro, JSON Schema or Protobuf; "
                                              "Confluent wire format)")
    schema_id = serializers.IntegerField(required=False, allow_null=True, min_value=1,
                                         help_text="or with this schema (not both)")
    message_type = serializers.CharField(required=False, allow_blank=True,
                                         help_text="Protobuf: the message's full name "
                                                   "(default: the schema's first)")


class TopicMessages(Base):
    capability = Capability.PRODUCE_MESSAGES

    @extend_schema(summary="Browse messages (bounded read; filters on key, value, header)",
                   parameters=[OpenApiParameter(n, t) for n, t in (
                       ("partition", int), ("start", str), ("offset", int),
                       ("timestamp", str), ("limit", int), ("key", str), ("value", str),
                       ("header", str))],
                   responses=inline_serializer("MessagePage", {
                       "messages": serializers.ListField(child=serializers.DictField()),
                       "scanned": serializers.IntegerField(),
                       "positions": serializers.CharField()}))
    def get(self, request: Request, name: str) -> Response:
        form = message_page.BrowseForm(request.query_params)
        if not form.is_valid():
            raise error("INVALID_REQUEST", form.errors.as_text())
        page, problem = message_page.read_page(form.query(name))
        if page is None:
            raise error(problem.split(":", 1)[0], problem, 400)
        return Response({"messages": [m.as_json() for m in page.messages],
                         "scanned": page.scanned, "positions": page.positions})

    @extend_schema(request=ProduceSerializer, summary="Produce one message (acks=all)",
                   responses={201: inline_serializer("Produced", {
                       "partition": serializers.IntegerField(),
                       "offset": serializers.IntegerField()})})
    def post(self, request: Request, name: str) -> Response:
        body = ProduceSerializer(data=request.data)
        if not body.is_valid():
            raise error("INVALID_REQUEST", str(body.errors))
        data = body.validated_data
        try:
            value, schema_id = _value(data)
            produced = actions.produce_message(
                request.user, name, value,
                data["key"].encode() if data.get("key") is not None else None,
                [(k, v.encode()) for k, v in (data.get("headers") or {}).items()],
                data.get("partition"), schema_id)
        except EncodeError as exc:
            raise error("INVALID_VALUE", str(exc)) from exc
        except actions.ActionError as exc:
            raise action_error(exc) from exc
        return Response({"partition": produced.partition, "offset": produced.offset},
                        status=status.HTTP_201_CREATED)


def _value(data: dict[str, Any]) -> tuple[bytes | None, int | None]:
    text = data.get("value")
    if data.get("subject") or data.get("schema_id") is not None:
        encoded = encode(text or "", data.get("subject") or "", data.get("schema_id"),
                         data.get("message_type") or "")
        return encoded.value, encoded.schema_id
    if text is None:
        return None, None
    if data.get("encoding") == "base64":
        try:
            return base64.b64decode(text, validate=True), None
        except binascii.Error as exc:
            raise EncodeError(f"not base64: {exc}") from exc
    return text.encode(), None


urlpatterns = [
    path("cluster", ClusterView.as_view(), name="api-cluster"),
    path("brokers", BrokerList.as_view(), name="api-brokers"),
    path("brokers/elect-leaders", ElectLeaders.as_view(), name="api-elect-leaders"),
    path("brokers/<int:node_id>", BrokerDetail.as_view(), name="api-broker"),
    path("brokers/<int:node_id>/<str:command>", BrokerCommandView.as_view(),
         name="api-broker-command"),
    path("topics", TopicList.as_view(), name="api-topics"),
    path("topics/<str:name>", TopicDetail.as_view(), name="api-topic"),
    path("topics/<str:name>/configs", TopicConfigs.as_view(), name="api-topic-configs"),
    path("topics/<str:name>/messages", TopicMessages.as_view(), name="api-topic-messages"),
    path("topics/<str:name>/elect-leaders", ElectLeaders.as_view(),
         name="api-topic-elect-leaders"),
]
