"""The proxy's fast lane: produce and fetch answered on the event loop, without Django's
handler.

`millrace/asgi.py` (`FastLane`) sends these routes here before Django sees them: v2
produce (to a topic or a partition), v3 produce (one record, or a stream) and v2 fetch from
a consumer instance (relayed to the process holding it, as `InstanceView` does, when that
is another one whose address the owner cache knows). Each runs the same view method that
`api.as_proxy_view` runs on the event loop, with what DRF's dispatch would have given it,
and its response goes through the same `api._completed` (a `Later` awaited on the loop), so
the bytes and headers are the ones Django sends.

Anything else declines (returns None) before a record is produced, and Django's handler
serves the request as before: anything that needs a thread (`need_thread`: a schema
registry call, an unknown topic, an instance whose owner is not in the owner cache), any
error (Django
renders it), a topic name or Host header that is not plain. Metadata that has aged is
refreshed on a thread first, so produce stays in the lane.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.http import QueryDict
from django.http.request import split_domain_port, validate_host
from django.http.response import HttpResponseBase

from clusterclient import ClusterRequestError, ClusterUnavailable

from . import errors
from .api import ProxyView, _completed, _on_loop
from .client import cluster
from .content_types import accepts_metadata
from .instances import views as instance_views
from .instances.forwarding import is_forwarded
from .instances.manager import manager
from .v2 import views as v2_views
from .v3 import produce as v3_produce

LaneHandler = Any  # see millrace.asgi.LaneHandler
LaneBody = Any  # see millrace.asgi.LaneBody
T = r"(?P<topic>[A-Za-z0-9._-]+)"
P = r"(?P<partition>[0-9]+)"
INSTANCE = r"consumers/(?P<group>[A-Za-z0-9._-]+)/instances/(?P<instance>[A-Za-z0-9._-]+)"
EMPTY_QUERY = QueryDict()


def routes() -> list[tuple[str, re.Pattern[str], LaneHandler]]:
    table: list[tuple[str, str, type[ProxyView]]] = [
        ("POST", f"topics/{T}", v2_views.TopicView),
        ("POST", f"topics/{T}/partitions/{P}", v2_views.PartitionView),
        ("POST", rf"v3/clusters/(?P<cluster_id>[A-Za-z0-9_-]+)/topics/{T}/records",
         v3_produce.RecordsView),
        ("GET", f"{INSTANCE}/records", instance_views.RecordsView),
    ]
    return [(method, re.compile(pattern + "/?"), _handler(view))
            for method, pattern, view in table]


class LaneRequest:
    """What the proxy's views read from DRF's Request: META, the body, query parameters."""

    def __init__(self, scope: dict[str, Any], body: bytes | None,
                 parts: AsyncIterator[bytes] | None = None) -> None:
        self.method: str = scope["method"]
        self.META = _meta(scope)
        self.kept_body = body  # see api.read_body
        self.body_parts = parts  # the body as it arrives (v3_produce.RecordsView)
        # The path below the proxy's mount, as FastLane matched it (forwarding.mount_relative)
        self.mount_path: str | None = scope.get("millrace.mount_path")
        raw = scope.get("query_string", b"")
        self.query_params = QueryDict(raw) if raw else EMPTY_QUERY
        self.META["QUERY_STRING"] = raw.decode()  # as Django's; forwarding relays it


def _handler(view_class: type[ProxyView]) -> LaneHandler:
    async def handle(scope: dict[str, Any], path: dict[str, str], body: LaneBody
                     ) -> HttpResponseBase | None:
        if view_class is v3_produce.RecordsView:
            # The body if it came at once (one record, mostly); else a stream, parsed as
            # its parts arrive.
            raw = await body.read(0)
            request = LaneRequest(scope, raw, None if raw is not None else body.chunks())
        else:
            raw = await body.read(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
            if raw is None:
                return None
            request = LaneRequest(scope, raw)
        if not _allowed_host(request.META.get("HTTP_HOST", "")) or not await _fresh_metadata():
            return None
        prepared = _prepared(view_class, request, path)
        if prepared is None:
            return None
        view, owner_url = prepared
        token = _on_loop.set(True)
        try:
            if owner_url is not None:  # as InstanceView.initial answers it
                response = view.forward(request, owner_url)  # type: ignore[attr-defined]
            else:
                response = getattr(view, request.method.lower())(request, **path)
        # The fast lane's boundary: an error, or NeedsThread, goes down Django's full path,
        # which serves (and renders) it; nothing is swallowed.
        except Exception:  # noqa: BLE001 - falls back to Django, which answers it
            return None
        finally:
            _on_loop.reset(token)
        renderer = view.renderer_classes[0]()
        request.accepted_renderer, request.accepted_media_type = (  # type: ignore[attr-defined]
            renderer, str(renderer.media_type))
        final = view.finalize_response(request, response)  # type: ignore[arg-type]
        return await _completed(final, {"view": view_class, "request": request})

    return handle


def _prepared(view_class: type[ProxyView], request: LaneRequest, path: dict[str, str]
              ) -> tuple[ProxyView, str | None] | None:
    """The view with what its `initial` sets up, and the owner's URL when another process
    holds its consumer instance; None where that would need Django."""
    view = view_class()
    view.setup(request, **path)  # type: ignore[arg-type]  # as as_view() does: HEAD too
    view.headers = view.default_response_headers
    if isinstance(view, v3_produce.RecordsView):
        cached = cluster().cached_metadata()
        cluster_id = (cached.cluster_id or "millrace") if cached is not None else None
        if cluster_id is None or cluster_id != path["cluster_id"]:
            return None
        view.links = _ClusterOnly(cluster_id)  # type: ignore[assignment]
    if isinstance(view, instance_views.InstanceView):
        token = _on_loop.set(True)
        try:
            forwarded = is_forwarded(request)  # type: ignore[arg-type]
            location = manager().locate(path["group"], path["instance"], forwarded)
        except (errors.RestProxyError, errors.NeedsThread):
            return None
        finally:
            _on_loop.reset(token)
        if location.owner_url is not None:
            if view.check_accept and not accepts_metadata(request.META.get("HTTP_ACCEPT")):
                return None
            return view, location.owner_url
        if location.instance is None:
            return None
        view.instance = location.instance
    return view, None


async def _fresh_metadata() -> bool:
    """Refresh the cluster's metadata on a thread when it has aged (every METADATA_TTL),
    rather than leave the request to a thread of Django's."""
    if cluster().cached_metadata() is not None:
        return True
    try:
        await asyncio.to_thread(cluster().metadata)
    except (ClusterUnavailable, ClusterRequestError):  # Django's path says so
        return False
    return True


class _ClusterOnly:
    """What produce reads of `ClusterView.links`: the cluster id."""

    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id


def _meta(scope: dict[str, Any]) -> dict[str, str]:
    """Request headers under Django's META names (repeated headers joined, as Django does)."""
    meta: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = "HTTP_" + name
        value = raw_value.decode("latin-1")
        meta[name] = f"{meta[name]},{value}" if name in meta else value
    return meta


_hosts: dict[str, bool] = {}


def _allowed_host(host: str) -> bool:
    """Django's own ALLOWED_HOSTS check (a refused Host is Django's to answer)."""
    allowed = _hosts.get(host)
    if allowed is None:
        domain, _ = split_domain_port(host)
        allowed = bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)
        if len(_hosts) >= 256:
            _hosts.clear()
        _hosts[host] = allowed
    return allowed

