"""The registry's fast lane: hot reads answered on the event loop, without Django's handler.

`millrace/asgi.py` (`FastLane`) sends these routes here before Django sees them. Each
runs the same view method Django would run, in the same `cache.memory_only()` mode as
`views.served`'s first attempt, with what DRF's dispatch would have given it: the Accept
header negotiated by `RegistryNegotiation` (remembered per header), the body parsed as
JSON, the subject decoded from the raw path and qualified. The answer is DRF's own
response, finalized and rendered by the view, so the bytes and headers are the ones Django
sends.

Anything else declines (returns None) and Django's handler serves the request as before: a
miss in the reader cache (`NotInMemory`: the database is needed), a write (registering a
schema the subject does not have yet), a `?format=` other than Protobuf's `serialized`
(whose text is cached like the schema's), a media type with parameters, a body
that is not a JSON object, a path that is not plain.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from django.http import HttpRequest, QueryDict
from django.http.response import HttpResponseBase
from rest_framework.exceptions import APIException
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response

import httpauth

from . import errors, params, views
from .cache import memory_only
from .negotiation import JSON, OCTET_STREAM, V1, VND, RegistryNegotiation

LaneHandler = Any  # see millrace.asgi.LaneHandler
LaneBody = Any  # see millrace.asgi.LaneBody
S = r"(?P<subject>[^/]+)"
V = r"(?P<version>[0-9]+|latest|-1)"
PARSED_TYPES = frozenset({"", V1, VND, JSON, OCTET_STREAM})
EMPTY_QUERY = QueryDict()


def routes() -> list[tuple[str, re.Pattern[str], LaneHandler]]:
    table: list[tuple[str, str, type[views.RegistryView]]] = [
        ("GET", r"schemas/ids/(?P<schema_id>[0-9]+)", views.SchemaByIdView),
        ("GET", r"schemas/ids/(?P<schema_id>[0-9]+)/schema", views.SchemaTextByIdView),
        ("GET", rf"subjects/{S}/versions", views.VersionListView),
        ("POST", rf"subjects/{S}/versions", views.VersionListView),
        ("GET", rf"subjects/{S}/versions/{V}", views.VersionView),
        ("GET", rf"subjects/{S}/versions/{V}/schema", views.VersionSchemaView),
        ("POST", rf"subjects/{S}", views.SubjectView),
    ]
    return [(method, re.compile(pattern), _handler(view)) for method, pattern, view in table]


class LaneRequest:
    """What the registry's views read from DRF's Request: query parameters and data."""

    def __init__(self, method: str, query: QueryDict, data: Any, accept: str) -> None:
        self.method = method
        self.query_params = query
        self.data = data
        self.META = {"HTTP_ACCEPT": accept} if accept else {}


def _handler(view_class: type[views.RegistryView]) -> LaneHandler:
    async def handle(scope: dict[str, Any], path: dict[str, str], body: LaneBody
                     ) -> HttpResponseBase | None:
        if httpauth.enabled() and httpauth.registry_authfile() is not None:
            return None  # the authfile's permissions are checked by the view, in Django
        headers = _headers(scope)
        negotiated = _negotiated(headers.get("accept", ""))
        kwargs = _kwargs(path)
        query = _query(scope)
        raw = await body.read(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        if raw is None:
            return None
        data = _data(scope["method"], headers.get("content-type", ""), raw)
        if negotiated is None or kwargs is None or query is None or data is _DECLINE:
            return None
        request = LaneRequest(scope["method"], query, data, headers.get("accept", ""))
        request.accepted_renderer, request.accepted_media_type = negotiated  # type: ignore[attr-defined]
        return _dispatch(view_class, request, kwargs)

    return handle


def _dispatch(view_class: type[views.RegistryView], request: LaneRequest,
              kwargs: dict[str, Any]) -> HttpResponseBase | None:
    """The view's method as DRF's dispatch runs it, from memory; None when it needs more."""
    view = view_class()
    view.setup(request, **kwargs)  # type: ignore[arg-type]  # as as_view() does: HEAD too
    view.headers = view.default_response_headers
    try:
        with memory_only():
            response = getattr(view, request.method.lower())(request, **kwargs)
    except errors.RegistryError as exc:
        response = Response(exc.body(), status=exc.status)
    # The fast lane's boundary: whatever it cannot finish (NotInMemory, or any error DRF's
    # dispatch renders) Django's full path serves and renders, so nothing is lost here.
    except Exception:  # noqa: BLE001 - falls back to Django, which answers it
        return None
    final = view.finalize_response(request, response)  # type: ignore[arg-type]
    assert isinstance(final, Response)
    final.render()
    return final


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """Request headers by name (repeated ones joined, as Django's META joins them)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers


_chosen: dict[str, tuple[BaseRenderer, str] | None] = {}


def _negotiated(accept: str) -> tuple[BaseRenderer, str] | None:
    """The renderer and media type DRF picks for this Accept header (None: not a plain one
    of ours, or 406, both left to Django)."""
    if accept not in _chosen:
        request = HttpRequest()
        if accept:
            request.META["HTTP_ACCEPT"] = accept
        request.query_params = EMPTY_QUERY  # type: ignore[attr-defined]
        renderers = [renderer() for renderer in views.RegistryView.renderer_classes]
        try:
            renderer, media_type = RegistryNegotiation().select_renderer(
                request, renderers)  # type: ignore[arg-type]  # reads META and query_params
        except APIException:
            found = None
        else:
            found = (renderer, media_type) if media_type == renderer.media_type else None
        if len(_chosen) >= 256:
            _chosen.clear()
        _chosen[accept] = found
    return _chosen[accept]


def _kwargs(path: dict[str, str]) -> dict[str, Any] | None:
    kwargs: dict[str, Any] = dict(path)
    if "schema_id" in kwargs:
        kwargs["schema_id"] = int(kwargs["schema_id"])
    if "subject" in kwargs:
        try:
            subject = unquote(kwargs["subject"], errors="strict")
        except UnicodeDecodeError:
            return None
        if params.SLASH in subject:
            return None
        kwargs["subject"] = params.qualified_subject(subject)
    return kwargs


def _query(scope: dict[str, Any]) -> QueryDict | None:
    raw = scope.get("query_string", b"")
    if not raw:
        return EMPTY_QUERY
    query = QueryDict(raw)
    return None if query.get("format", "serialized") != "serialized" else query


_DECLINE = object()


def _data(method: str, content_type: str, body: bytes) -> Any:
    """The body as DRF's JSON parsers give it (for a POST), or _DECLINE."""
    if method != "POST":
        return None
    media_type, _, parameters = content_type.partition(";")
    if media_type.strip() not in PARSED_TYPES or parameters.strip() not in ("", "charset=utf-8"):
        return _DECLINE
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_no_constants)
    except ValueError:
        return _DECLINE
    return data if isinstance(data, dict) else _DECLINE


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # DRF's parser refuses NaN and Infinity too
