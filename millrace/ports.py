"""Serve the registry and the REST proxy at the root of their own ports.

Confluent clients are usually configured with a root URL (`http://host:8081`,
`http://host:8082`). The platform runs one set of server workers listening on several
ports; a request that arrives on the registry's or the proxy's port is routed with that
app's root URLconf, and every other port gets the control center's URLconf with both apps
under prefixes.

The middleware is async-capable, so under ASGI it costs no hop to a thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase


def api_urlconf(port: object) -> str | None:
    """The root URLconf of the app whose own port this is, or None for any other port."""
    return {
        str(settings.REGISTRY_PORT): "registry.root_urls",
        str(settings.RESTPROXY_PORT): "restproxy.root_urls",
    }.get(str(port))


class PortRoutingMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        urlconf = api_urlconf(request.META.get("SERVER_PORT", ""))
        if urlconf is not None:
            request.urlconf = urlconf
        response: HttpResponseBase | Awaitable[HttpResponseBase] = self.get_response(request)
        return response  # a coroutine when async: the caller awaits it
