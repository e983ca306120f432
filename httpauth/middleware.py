"""`BasicAuthMiddleware`: HTTP Basic in front of the registry and the REST proxy.

In both MIDDLEWARE and API_MIDDLEWARE, after `PortRoutingMiddleware` (which sets the
urlconf of a request on an API's own port). Requests to the pages pass untouched; with
`MILLRACE_HTTP_AUTH` off, every request does. Async-capable: a login to the cluster (a
cache miss) runs on a thread of its own, never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from apierrors import ApiError

from . import REGISTRY, RESTPROXY, authenticate, cached, current_principal, enabled, respond

URLCONFS = {"registry.root_urls": REGISTRY, "restproxy.root_urls": RESTPROXY}


def api_of(request: HttpRequest) -> str | None:
    """Which API a request is for (by its port's urlconf or its prefix), or None."""
    app = URLCONFS.get(str(getattr(request, "urlconf", "")))
    if app is not None:
        return app
    for name, prefix in ((REGISTRY, settings.REGISTRY_PREFIX),
                         (RESTPROXY, settings.RESTPROXY_PREFIX)):
        if prefix and request.path_info.startswith(f"/{prefix.strip('/')}/"):
            return name
    return None


class BasicAuthMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        app = api_of(request) if enabled() else None
        if app is None:
            return self.get_response(request)
        try:
            principal = authenticate(app, request.META.get("HTTP_AUTHORIZATION"))
        except ApiError as error:
            return respond(error, app)
        request.millrace_principal = principal  # type: ignore[attr-defined]
        token = current_principal.set(principal)  # a sync thread serves many requests
        try:
            return self.get_response(request)
        finally:
            current_principal.reset(token)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        app = api_of(request) if enabled() else None
        if app is not None:
            header = request.META.get("HTTP_AUTHORIZATION")
            try:
                principal = cached(app, header) or await asyncio.to_thread(
                    authenticate, app, header)
            except ApiError as error:
                return respond(error, app)
            request.millrace_principal = principal  # type: ignore[attr-defined]
            # Not reset: the request's task ends with it, and a streamed answer (a v3
            # produce stream) still talks to Kafka as the caller after this returns.
            current_principal.set(principal)
        response: HttpResponseBase = await self.get_response(request)
        return response
