"""v2 consumer instances: create, subscribe, assign, seek, fetch, commit, delete."""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from django.http import HttpResponseBase
from django.urls import reverse
from rest_framework.request import Request
from rest_framework.response import Response

from restproxy import actions, content_types, errors
from restproxy.api import Later, ProxyView, json_object, read_json

from . import ops
from .forwarding import forward, is_forwarded
from .instance import ConsumerInstance
from .manager import manager


def instance_url(request: Request, group: str, name: str) -> str:
    path = reverse("restproxy:v2-instance", kwargs={"group": group, "instance": name})
    advertised = settings.RESTPROXY_ADVERTISED_URL.rstrip("/")
    if advertised:
        root = reverse("restproxy:root")
        return f"{advertised}/{path[len(root):]}"
    return request.build_absolute_uri(path)


class CreateConsumerView(ProxyView):
    def post(self, request: Request, group: str) -> Response:
        body = json_object(read_json(request, allow_empty=True) or {})
        instance = actions.create_consumer_instance(
            group, body, settings.RESTPROXY_CONSUMER_REQUEST_TIMEOUT_MS
        )
        return Response({"instance_id": instance.name,
                         "base_uri": instance_url(request, group, instance.name)})


class InstanceView(ProxyView):
    """Base: find the instance here, or answer by forwarding to the process owning it."""

    def dispatch_to_owner(self, request: Request, group: str, instance: str
                          ) -> ConsumerInstance | HttpResponseBase:
        location = manager().locate(group, instance, is_forwarded(request))
        if location.owner_url is not None:
            return self.forward(request, location.owner_url)
        assert location.instance is not None
        return location.instance

    def forward(self, request: Request, owner_url: str) -> HttpResponseBase:
        return forward(request, owner_url)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        found = self.dispatch_to_owner(request, kwargs["group"], kwargs["instance"])
        if isinstance(found, HttpResponseBase):
            raise _Forwarded(found)
        self.instance = found

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, _Forwarded):
            return exc.response  # type: ignore[return-value]  # a plain HttpResponse
        return super().handle_exception(exc)


class _Forwarded(Exception):
    def __init__(self, response: HttpResponseBase) -> None:
        self.response = response


def _partitions(body: dict[str, Any], key: str = "partitions") -> list[tuple[str, int]]:
    items = body.get(key)
    if not isinstance(items, list):
        raise errors.invalid_payload(f"{key} must be a list")
    try:
        return [(str(item["topic"]), int(item["partition"])) for item in items]
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.invalid_payload("each partition needs a topic and a partition") from exc


def _positions(body: dict[str, Any], key: str, field: str) -> list[tuple[str, int, int]]:
    items = body.get(key)
    if not isinstance(items, list):
        raise errors.invalid_payload(f"{key} must be a list")
    try:
        return [(str(i["topic"]), int(i["partition"]), int(i[field])) for i in items]
    except (KeyError, TypeError, ValueError) as exc:
        raise errors.invalid_payload(f"each entry needs topic, partition and {field}") from exc


class InstanceDeleteView(InstanceView):
    def delete(self, request: Request, group: str, instance: str) -> Response:
        actions.delete_consumer_instance(group, instance)
        return Response(status=204)


class SubscriptionView(InstanceView):
    def post(self, request: Request, group: str, instance: str) -> Response:
        body = json_object(read_json(request))
        topics, pattern = body.get("topics"), body.get("topic_pattern")
        if topics and pattern:
            raise errors.illegal_state("topics and topic_pattern are mutually exclusive")
        if not topics and not pattern:
            raise errors.invalid_payload("Subscription needs topics or topic_pattern")
        if topics is not None and not (
            isinstance(topics, list) and all(isinstance(t, str) for t in topics)
        ):
            raise errors.invalid_payload("topics must be a list of topic names")
        self.instance.call(ops.subscribe(topics, pattern))
        return Response(status=204)

    def get(self, request: Request, group: str, instance: str) -> Response:
        return Response({"topics": self.instance.call(ops.subscription)})

    def delete(self, request: Request, group: str, instance: str) -> Response:
        self.instance.call(ops.unsubscribe)
        return Response(status=204)


class AssignmentsView(InstanceView):
    def post(self, request: Request, group: str, instance: str) -> Response:
        partitions = _partitions(json_object(read_json(request)))
        self.instance.call(ops.assign(partitions))
        return Response(status=204)

    def get(self, request: Request, group: str, instance: str) -> Response:
        assigned = self.instance.call(ops.assignment)
        return Response({"partitions": [{"topic": t, "partition": p} for t, p in assigned]})


class PositionsView(InstanceView):
    def post(self, request: Request, group: str, instance: str) -> Response:
        body = json_object(read_json(request))
        if "timestamps" in body:
            stamps = _positions(body, "timestamps", "timestamp")
            self.instance.call(ops.seek_timestamps(stamps))
        else:
            self.instance.call(ops.seek(_positions(body, "offsets", "offset")))
        return Response(status=204)


class PositionsEdgeView(InstanceView):
    beginning = True

    def post(self, request: Request, group: str, instance: str) -> Response:
        partitions = _partitions(json_object(read_json(request)))
        self.instance.call(ops.seek_edge(partitions, self.beginning))
        return Response(status=204)


class OffsetsView(InstanceView):
    def post(self, request: Request, group: str, instance: str) -> Response:
        body = read_json(request, allow_empty=True)
        offsets = None
        if body and json_object(body).get("offsets") is not None:
            offsets = _positions(body, "offsets", "offset")
        self.instance.call(ops.commit(offsets))
        return Response(status=204)

    def get(self, request: Request, group: str, instance: str) -> Response:
        body = read_json(request, allow_empty=True)
        if not body:
            raise errors.partition_not_found()
        found = self.instance.call(ops.committed(_partitions(json_object(body))))
        return Response({"offsets": [
            {"topic": tp.topic, "partition": tp.partition, "offset": tp.offset,
             "metadata": tp.metadata or ""} for tp in found
        ]})


def fetch_args(request: Request, instance: ConsumerInstance) -> tuple[float, int]:
    try:
        params = request.query_params
        timeout_ms = int(params.get("timeout", instance.config.request_timeout_ms))
        max_bytes = int(params.get("max_bytes", settings.RESTPROXY_CONSUMER_MAX_BYTES))
    except ValueError as exc:
        raise errors.invalid_payload("timeout and max_bytes must be integers") from exc
    max_bytes = max(1, min(max_bytes, settings.RESTPROXY_CONSUMER_MAX_BYTES))
    return max(0, timeout_ms) / 1000, max_bytes


class RecordsView(InstanceView):
    check_accept = False
    loop_methods = frozenset({"GET"})

    def get(self, request: Request, group: str, instance: str) -> Response:
        fmt = content_types.fetch_format(request.META.get("HTTP_ACCEPT"),
                                         self.instance.config.format)
        timeout, max_bytes = fetch_args(request, self.instance)
        owner = self.instance

        async def answer() -> Response:
            async with asyncio.timeout(timeout + 60):
                bodies = await owner.acall(lambda i: i.fetch(timeout, max_bytes, fmt))
            response = Response(bodies)
            response.content_type = fmt.v2_media_type
            return response

        return Later(answer)
