"""What every proxy view shares: negotiation, bodies read with a size cap, error rendering,
and how views are served (`as_proxy_view`).

Views are DRF APIViews. A method listed in a view's `loop_methods` first runs on the event
loop: it must not block, and code that would (a metadata refresh, a registry call, a
database query, forwarding) calls `need_thread()` first, which sends the request to a
worker thread instead. Every other method runs on a worker thread of its own, not
Django's single sync thread: confluent-kafka calls block, and one long poll would stall
every other request. A view that must wait (for delivery reports, for a consumer
instance's owner thread) returns `Later`: the wait happens on the event loop, holding no
thread.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.response import SimpleTemplateResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apierrors import exception_handler
from clusterclient.clusters import KafkaCluster

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
    loop_methods: frozenset[str] = frozenset()  # see the module docstring

    api_error = staticmethod(errors.api_error)  # for apierrors.exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        selected.set(None)  # the default cluster unless a v3 path names another
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
    kept: bytes | None = getattr(django_request, "kept_body", None)
    raw = kept if kept is not None else django_request.read(limit + 1)
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


_on_loop = contextvars.ContextVar("restproxy_on_loop", default=False)
# The cluster a request acts on when it is not the default one (client.py picks its
# clients by it): v3 views set it from the path's cluster id (v3/views.py ClusterView);
# every view starts on the default cluster, None.
selected: contextvars.ContextVar[KafkaCluster | None] = contextvars.ContextVar(
    "restproxy_cluster", default=None)


def need_thread() -> None:
    if _on_loop.get():
        raise errors.NeedsThread


class Later(Response):
    """A response that `finish` completes on the event loop (it may raise a proxy error)."""

    def __init__(self, finish: Callable[[], Awaitable[HttpResponseBase]]) -> None:
        super().__init__()
        self.finish = finish


async def _completed(response: HttpResponseBase, context: dict[str, Any]) -> HttpResponseBase:
    if isinstance(response, Later):
        try:
            final = await response.finish()
        # As DRF's own dispatch (APIView.handle_exception): any error of the view is
        # rendered by the one exception handler, never left to become a bare 500.
        except Exception as exc:  # noqa: BLE001 - rendered by exception_handler
            final = exception_handler(exc, context) or Response(status=500)
            for name, value in response.items():  # the view's own (Allow), as DRF adds them
                if name.lower() != "content-type" and not final.has_header(name):
                    final[name] = value
        if isinstance(final, Response):
            final.accepted_renderer = response.accepted_renderer
            final.accepted_media_type = response.accepted_media_type
            final.renderer_context = response.renderer_context  # type: ignore[attr-defined]
            if final.get("Content-Type") is None and response.get("Content-Type"):
                final["Content-Type"] = response["Content-Type"]
        response = final
    if not isinstance(response, SimpleTemplateResponse):
        return response
    # Plain: Django's async handler hops to a thread to render anything with a `render`.
    response.render()
    return HttpResponse(response.content, status=response.status_code,
                        headers=dict(response.headers))


def body_kept(request: HttpRequest) -> bool:
    """Read the body into memory, so that a second attempt can read it again, if Django
    allows that (DATA_UPLOAD_MAX_MEMORY_SIZE); a larger one goes straight to a thread."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if not declared.isdigit() or int(declared) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return False
    request.kept_body = request.body  # type: ignore[attr-defined]  # see read_body
    return True


def as_proxy_view(view_class: type[ProxyView], **initkwargs: Any) -> Callable[..., Any]:
    """An async Django view serving the DRF view on the event loop or a worker thread."""
    sync_view = view_class.as_view(**initkwargs)
    on_thread = sync_to_async(sync_view, thread_sensitive=False)

    async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # The cluster a v3 path selects is the request's only: asgiref copies what a view
        # sets in its context back to the caller's, and a synchronous caller (Django's test
        # client, a management command) would otherwise keep acting on that cluster after.
        chosen = selected.set(None)
        try:
            return await _serve(request, *args, **kwargs)
        finally:
            selected.reset(chosen)

    async def _serve(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        context = {"view": view_class, "request": request}
        if request.method in view_class.loop_methods and body_kept(request):
            token = _on_loop.set(True)
            try:
                return await _completed(sync_view(request, *args, **kwargs), context)
            except errors.NeedsThread:
                pass
            finally:
                _on_loop.reset(token)
        return await _completed(await on_thread(request, *args, **kwargs), context)

    view.cls = view_class  # type: ignore[attr-defined]  # drf-spectacular finds the view
    view.initkwargs = initkwargs  # type: ignore[attr-defined]
    return csrf_exempt(view)
