"""ASGI entry point: HTTP through Django, websockets through Channels.

Two Django handlers share the process. The registry and the REST proxy (their own ports,
or their prefixes on the control center's port) go to one loaded with API_MIDDLEWARE, which
is async only (see api_middleware.py); everything else, the control center's pages and the
admin, goes to one with the full MIDDLEWARE.

Static files (our CSS/JS and the vendored Swagger UI) are served by Django's own static
files handler, so the server needs nothing in front of it; put a CDN-less reverse proxy or
whitenoise in front only when traffic calls for it.

Websockets accept only pages of our own origin (AllowedHostsOriginValidator: the Origin
header's host must be in ALLOWED_HOSTS) and carry the session's user (AuthMiddlewareStack).
"""

import os
from typing import Any

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlcenter.settings")
django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())

# These need Django set up first.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402

from controlcenter.routing import websocket_urlpatterns  # noqa: E402


class ApiHandler(ASGIHandler):
    """Django's ASGI handler with API_MIDDLEWARE in place of MIDDLEWARE, and no thread of
    its own for each request.

    Django runs each request in asgiref's ThreadSensitiveContext, which starts a thread
    for the request's first sync call (the request_started signal's receivers are sync,
    so every request makes one) and joins it at the end; profiled under load, that was
    the largest cost of a registry read. The APIs' sync work (those signals, and the
    registry's database work on a cache miss or a write) runs instead on the process's
    one sync thread; their other blocking work runs on threads of its own.
    """

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}")
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        # Django builds the chain from settings.MIDDLEWARE; swap it in for this one build.
        middleware = settings.MIDDLEWARE
        settings.MIDDLEWARE = settings.API_MIDDLEWARE
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = middleware


class HttpRouter:
    """Send API requests to the API handler, the rest to the control center's."""

    def __init__(self, api: Any, pages: Any) -> None:
        self.api, self.pages = api, pages
        self.api_ports = {settings.REGISTRY_PORT, settings.RESTPROXY_PORT}
        self.api_prefixes = tuple(
            f"/{prefix}" for prefix in (settings.REGISTRY_PREFIX, settings.RESTPROXY_PREFIX)
            if prefix
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        server = scope.get("server")
        port = server[1] if server else None
        is_api = port in self.api_ports or scope["path"].startswith(self.api_prefixes)
        await (self.api if is_api else self.pages)(scope, receive, send)


application = ProtocolTypeRouter({
    "http": HttpRouter(ApiHandler(), django_asgi_app),
    "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
