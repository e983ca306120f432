"""v2 metadata and produce: topics, partitions, offsets, brokers."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response

from clusterclient import EARLIEST, LATEST, PartitionMetadata, TopicPartition
from restproxy import actions, client, content_types, errors
from restproxy.api import Later, ProxyView, json_object, parse_json, read_body
from restproxy.client import cluster


def v2_partition(partition: PartitionMetadata) -> dict[str, Any]:
    return {
        "partition": partition.partition,
        "leader": partition.leader,
        "replicas": [
            {"broker": b, "leader": b == partition.leader, "in_sync": b in partition.isr}
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
        topics = cluster().metadata(refresh=True).topics
        return Response(sorted(name for name, t in topics.items() if not t.internal))


class TopicView(ProxyView):
    check_accept = False  # POST negotiates on Content-Type; GET checks below
    loop_methods = frozenset({"POST"})

    def get(self, request: Request, topic: str) -> Response:
        if not content_types.accepts_metadata(request.META.get("HTTP_ACCEPT")):
            raise errors.not_acceptable()
        metadata = client.topic(topic)
        configs = {entry.name: entry.value for entry in cluster().topic_configs(topic)}
        partitions = [v2_partition(p) for p in metadata.partitions]
        return Response({"name": topic, "configs": configs, "partitions": partitions})

    def post(self, request: Request, topic: str) -> Response:
        return produce(request, topic, None)


class PartitionListView(ProxyView):
    def get(self, request: Request, topic: str) -> Response:
        return Response([v2_partition(p) for p in client.topic(topic).partitions])


class PartitionView(ProxyView):
    check_accept = False
    loop_methods = frozenset({"POST"})

    def get(self, request: Request, topic: str, partition: str) -> Response:
        number = parse_partition(partition)
        found = client.topic(topic).partition(number)
        if found is None:
            raise errors.partition_not_found(number)
        return Response(v2_partition(found))

    def post(self, request: Request, topic: str, partition: str) -> Response:
        number = parse_partition(partition)
        return produce(request, topic, number)


class PartitionOffsetsView(ProxyView):
    def get(self, request: Request, topic: str, partition: str) -> Response:
        number = parse_partition(partition)
        client.check_partition(topic, number)
        tp = TopicPartition(topic, number)
        earliest = cluster().list_offsets({tp: EARLIEST}).checked()[tp].offset
        latest = cluster().list_offsets({tp: LATEST}).checked()[tp].offset
        return Response({"beginning_offset": earliest, "end_offset": latest})


class BrokerListView(ProxyView):
    def get(self, request: Request) -> Response:
        brokers = cluster().metadata(refresh=True).brokers
        return Response({"brokers": [b.node_id for b in brokers]})


def produce(request: Request, topic: str, partition: int | None) -> Response:
    fmt = content_types.produce_format(request.META.get("CONTENT_TYPE"))
    body = json_object(parse_json(read_body(request)))
    produced = actions.produce_v2(topic, partition, fmt, body)

    async def answer() -> Response:
        body = await produced.answer()
        if produced.refusal is not None:  # the caller's ACLs: Confluent's 403 40301
            return Response(produced.refusal.body(), status=produced.refusal.status)
        return Response(body)

    return Later(answer)


class RootView(ProxyView):
    check_accept = False
    loop_methods = frozenset({"GET"})

    def get(self, request: Request) -> HttpResponseBase:
        return Response({})  # a browser gets the project's index page instead
