"""ASGI entry point: HTTP through Django, websockets through Channels.

Two Django handlers share the process. The registry and the REST proxy (their own ports,
or their prefixes on the control center's port) go to one loaded with API_MIDDLEWARE, which
is async only (see api_middleware.py); everything else, the control center's pages and the
admin, goes to one with the full MIDDLEWARE.

In front of the API handler, the fast lane (`FastLane`) answers the hot requests, registry
reads and proxy produce, without Django's handler: each app's `lane.py` lists them and
dispatches its own views' methods, or declines, and the request goes to Django unchanged,
its body replayed. Profiled under wrk, Django's handler (signals hopping to a thread, the
middleware chain, URL resolving) and DRF's dispatch cost several times the views' work.

Static files (our CSS/JS and the vendored Swagger UI) are served by Django's own static
files handler, so the server needs nothing in front of it; put a CDN-less reverse proxy or
whitenoise in front only when traffic calls for it.

Websockets accept only pages of our own origin (AllowedHostsOriginValidator: the Origin
header's host must be in ALLOWED_HOSTS) and carry the session's user (AuthMiddlewareStack).
"""

import asyncio
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")
django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())

# These need Django set up first.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.http import HttpResponseBase  # noqa: E402

import httpauth  # noqa: E402
import registry.lane  # noqa: E402
import restproxy.lane  # noqa: E402
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


Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
LaneHandler = Callable[[dict[str, Any], dict[str, str], "LaneBody"],
                       Awaitable[HttpResponseBase | None]]
LaneRoutes = list[tuple[str, re.Pattern[str], LaneHandler]]
MOUNT_PATH = "millrace.mount_path"  # the scope key of a lane request's path below its mount


class LaneBody:
    """A lane request's body, read whole (`read`) or as it arrives (`chunks`).

    What `read` took is given back to Django's handler when the lane declines (`replaying`);
    a handler that has taken `chunks` has answered and cannot decline any more.
    """

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._read: list[bytes] = []
        self.ended = False  # the last part is in
        self.gone = False  # the client disconnected

    async def read(self, limit: int) -> bytes | None:
        """The whole body; None when it is over `limit` or the client has gone (with
        `limit` 0: the body if it came in one part, as a short one does)."""
        size = sum(map(len, self._read))
        while not self.ended:
            part = await self._next()
            if part is None:
                return None
            self._read.append(part)
            size += len(part)
            if size > limit and not self.ended:
                return None
        return b"".join(self._read)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's parts as the server hands them over (those `read` took first)."""
        while self._read:
            yield self._read.pop(0)
        while not self.ended:
            part = await self._next()
            if part is None:
                return
            yield part

    async def _next(self) -> bytes | None:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self.gone = self.ended = True
            return None
        self.ended = not message.get("more_body", False)
        part: bytes = message.get("body", b"")
        return part

    def replaying(self) -> Receive:
        """`receive` with the part of the body already read given back first."""
        pending = [{"type": "http.request", "body": b"".join(self._read),
                    "more_body": not self.ended}]

        async def replay() -> dict[str, Any]:
            return pending.pop() if pending else await self._receive()

        return replay


class FastLane:
    """Answer an app's hot requests before Django's handler, or hand them to it unchanged.

    A lane route is (method, pattern on the raw path below the app's mount point, handler);
    that path is in the scope under MOUNT_PATH.
    The handler is called with the scope, the pattern's groups and the body (`LaneBody`),
    which it reads whole (up to DATA_UPLOAD_MAX_MEMORY_SIZE, the most Django keeps in
    memory) or, for a stream, as it arrives. It answers with a Django response, sent as
    Django sends it, or None: then the request goes to Django's handler with what was read
    of the body replayed, as if the lane were not there.
    """

    def __init__(self, django: ApiHandler, mounts: list[tuple[int, str, LaneRoutes]]) -> None:
        self.django = django
        self.ports = {port: routes for port, _, routes in mounts}
        self.prefixes = [(f"/{prefix}", routes) for _, prefix, routes in mounts if prefix]

    def route(self, scope: dict[str, Any]) -> tuple[LaneHandler, dict[str, str]] | None:
        raw = scope.get("raw_path")
        if not raw:
            return None
        path = raw.decode("latin-1")
        server = scope.get("server")
        routes = self.ports.get(server[1]) if server else None
        if routes is not None:
            path = path[1:]
        else:
            for prefix, routes in self.prefixes:  # noqa: B007  (routes is used below)
                if path.startswith(prefix):
                    path = path[len(prefix):]
                    break
            else:
                return None
        for method, pattern, handler in routes:
            match = pattern.fullmatch(path)
            if match is not None and method == scope["method"]:
                scope[MOUNT_PATH] = path  # what a handler relays when it forwards
                return handler, match.groupdict()
        return None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        found = self.route(scope)
        if found is None:
            await self.django(scope, receive, send)
            return
        handler, params = found
        body = LaneBody(receive)
        response = await handler(scope, params, body)
        if body.gone:
            return
        if response is None:
            await self.django(scope, body.replaying(), send)
            return
        if not response.streaming and not response.has_header("Content-Length"):
            response.headers["Content-Length"] = str(len(response.content))  # type: ignore[attr-defined]
        await self.django.send_response(response, send)


class HttpRouter:
    """Send API requests to the API handler (through the fast lane), the rest to the
    control center's."""

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
        if is_api and httpauth.enabled():
            # The lane guard keeps the caller in a context variable for the whole request
            # (a streamed answer included): a task of its own, as uvicorn gives every
            # request, so it never reaches whoever called the application in process.
            await asyncio.create_task(self.api(scope, receive, send))
            return
        await (self.api if is_api else self.pages)(scope, receive, send)


lane = FastLane(ApiHandler(), [
    (settings.REGISTRY_PORT, settings.REGISTRY_PREFIX,
     httpauth.guard_lane(httpauth.REGISTRY, registry.lane.routes())),
    (settings.RESTPROXY_PORT, settings.RESTPROXY_PREFIX,
     httpauth.guard_lane(httpauth.RESTPROXY, restproxy.lane.routes())),
])
application = ProtocolTypeRouter({
    "http": HttpRouter(lane, django_asgi_app),
    "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
