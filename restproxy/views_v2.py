"""v2 metadata and produce: topics, partitions, offsets, brokers."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response

from . import actions, content_types, errors, index
from . import kafka_admin as admin
from .api import ProxyView, json_object, parse_json, read_body
from .client import gateway


def v2_partition(partition: Any) -> dict[str, Any]:
    return {
        "partition": partition.id,
        "leader": partition.leader,
        "replicas": [
            {"broker": b, "leader": b == partition.leader, "in_sync": b in partition.isrs}
            for b in partition.replicas
        ],
    }


def parse_partition(raw: str) -> int:
    try:
        return int(raw)
    except ValueError as exc:
        raise errors.partition_not_found(raw) from exc


class TopicListView(ProxyView):
    def get(self, request: Request) -> Response:
        topics = gateway().metadata(refresh=True).topics
        return Response(sorted(name for name in topics if not name.startswith("__")))


class TopicView(ProxyView):
    check_accept = False  # POST negotiates on Content-Type; GET checks below

    def get(self, request: Request, topic: str) -> Response:
        if not content_types.accepts_metadata(request.META.get("HTTP_ACCEPT")):
            raise errors.not_acceptable()
        metadata = gateway().topic(topic)
        configs = {entry.name: entry.value for entry in admin.topic_configs(topic)}
        partitions = [v2_partition(metadata.partitions[p]) for p in sorted(metadata.partitions)]
        return Response({"name": topic, "configs": configs, "partitions": partitions})

    def post(self, request: Request, topic: str) -> Response:
        return produce(request, topic, None)


class PartitionListView(ProxyView):
    def get(self, request: Request, topic: str) -> Response:
        metadata = gateway().topic(topic)
        return Response([v2_partition(metadata.partitions[p]) for p in sorted(metadata.partitions)])


class PartitionView(ProxyView):
    check_accept = False

    def get(self, request: Request, topic: str, partition: str) -> Response:
        number = parse_partition(partition)
        gateway().check_partition(topic, number)
        return Response(v2_partition(gateway().topic(topic).partitions[number]))

    def post(self, request: Request, topic: str, partition: str) -> Response:
        number = parse_partition(partition)
        return produce(request, topic, number)


class PartitionOffsetsView(ProxyView):
    def get(self, request: Request, topic: str, partition: str) -> Response:
        number = parse_partition(partition)
        gateway().check_partition(topic, number)
        earliest, latest = admin.watermarks(topic, [number])[number]
        return Response({"beginning_offset": earliest, "end_offset": latest})


class BrokerListView(ProxyView):
    def get(self, request: Request) -> Response:
        return Response({"brokers": sorted(gateway().metadata(refresh=True).brokers)})


def produce(request: Request, topic: str, partition: int | None) -> Response:
    fmt = content_types.produce_format(request.META.get("CONTENT_TYPE"))
    body = json_object(parse_json(read_body(request)))
    return Response(actions.produce_v2(topic, partition, fmt, body))


class RootView(ProxyView):
    check_accept = False

    def get(self, request: Request) -> HttpResponseBase:
        if index.wanted(request._request):
            return index.page(request._request)
        return Response({})
