"""What every proxy view shares: negotiation, bodies read with a size cap, error rendering.

Views are DRF APIViews served from a thread pool (`as_threaded_view`): confluent-kafka calls
block, and Django would otherwise run every sync view of a process on one shared thread,
so one long poll would stall every other request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from . import content_types, errors


class V2Renderer(JSONRenderer):
    media_type = content_types.V2_JSON
    charset = None


class V3Renderer(JSONRenderer):
    media_type = content_types.V3_JSON


class ProxyNegotiation(BaseContentNegotiation):
    """Views check Accept themselves (406 vs 40601 depends on the endpoint)."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return None

    def select_renderer(self, request: Request, renderers: Iterable[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, str(renderer.media_type)


class ProxyView(APIView):
    authentication_classes = ()
    permission_classes = ()
    parser_classes = ()
    renderer_classes: Sequence[type[BaseRenderer]] = (V2Renderer,)
    content_negotiation_class = ProxyNegotiation
    check_accept = True

    def get_exception_handler(self) -> Callable[..., Any]:
        return errors.exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if self.check_accept and not content_types.accepts_metadata(
            request.META.get("HTTP_ACCEPT")
        ):
            raise errors.not_acceptable()


class V3View(ProxyView):
    renderer_classes = (V3Renderer,)
    check_accept = False


def read_body(request: Request | HttpRequest) -> bytes:
    """The raw body, 413 above RESTPROXY_MAX_REQUEST_BYTES (chunked bodies included)."""
    django_request = request._request if isinstance(request, Request) else request
    limit = settings.RESTPROXY_MAX_REQUEST_BYTES
    declared = django_request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise errors.body_too_large(limit)
    raw = django_request.read(limit + 1)
    if len(raw) > limit:
        raise errors.body_too_large(limit)
    return raw


def parse_json(raw: bytes, allow_empty: bool = False) -> Any:
    if not raw.strip():
        if allow_empty:
            return None
        raise errors.bad_request("Request body is empty")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"Malformed JSON: {exc}") from exc


def read_json(request: Request, allow_empty: bool = False) -> Any:
    content_types.check_json_body(request.META.get("CONTENT_TYPE"))
    return parse_json(read_body(request), allow_empty)


def json_object(value: Any, what: str = "Request body") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise errors.invalid_payload(f"{what} must be a JSON object")
    return value


def as_threaded_view(view_class: type[APIView], **initkwargs: Any) -> Callable[..., Any]:
    """An async Django view running the DRF view on a worker thread of its own."""
    sync_view = view_class.as_view(**initkwargs)
    run = sync_to_async(sync_view, thread_sensitive=False)

    async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response: HttpResponseBase = await run(request, *args, **kwargs)
        if hasattr(response, "render") and not getattr(response, "is_rendered", True):
            response = await sync_to_async(response.render, thread_sensitive=False)()
        return response

    view.cls = view_class  # type: ignore[attr-defined]  # drf-spectacular finds the view
    view.initkwargs = initkwargs  # type: ignore[attr-defined]
    return csrf_exempt(view)
