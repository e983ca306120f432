"""Kafka Connect's REST API as a plain ASGI application, served by uvicorn.

A route table maps (method, path pattern) to an endpoint in `endpoints.py`; errors become
Connect's body `{"error_code": <HTTP status>, "message": ...}`. An endpoint that only the
leader may serve raises `NotLeader` on a follower, and the request is forwarded to the
leader's URL as it came (once: a forwarded request that misses again gets 409).

With Basic auth on (`rest_auth.py`), every request authenticates before it is routed, and
a forwarded one carries the caller's Authorization header, so the leader checks it too; a
401 the leader answers comes back with its `WWW-Authenticate` challenge (this worker's, if
the leader's answer lacks one). With `listeners=https://...` (`rest_tls.py`) uvicorn serves
the API over TLS and forwarding checks the leader's certificate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx

from connect.errors import BadRequest, ConnectRestError, NotLeader
from connect.herder import Herder
from connect.rest_auth import BasicAuth, Unauthorized

log = logging.getLogger(__name__)
FORWARDED = b"x-connect-forwarded"
REQUEST_TIMEOUT_S = 90  # Kafka's rest request timeout
REALM = "KafkaConnect"  # BasicAuthSecurityRestExtension's default realm


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    params: dict[str, str]
    herder: Herder
    pairs: list[tuple[str, str]] = field(default_factory=list)

    def json(self) -> Any:
        if not self.body:
            raise BadRequest("Request body is empty")
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise BadRequest(f"Unrecognized or malformed JSON body: {exc}") from None

    def flag(self, name: str) -> bool:
        return self.query.get(name, "false").lower() == "true"

    async def on_herder(self, fn: Callable[[], Any]) -> Any:
        future = self.herder.call(fn)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise ConnectRestError("Request timed out", 500) from None


@dataclass
class Response:
    status: int
    body: Any = None
    raw: bytes | None = field(default=None, repr=False)
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def encoded(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return b"" if self.body is None else json.dumps(self.body).encode()


Endpoint = Callable[[Request], Awaitable[Response]]


class Router:
    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern[str], Endpoint]] = []

    def add(self, method: str, pattern: str) -> Callable[[Endpoint], Endpoint]:
        regex = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern) + "/?$")

        def register(endpoint: Endpoint) -> Endpoint:
            self.routes.append((method, regex, endpoint))
            return endpoint
        return register

    def match(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]]:
        allowed = False
        for route_method, regex, endpoint in self.routes:
            found = regex.match(path)
            if found:
                allowed = True
                if route_method == method:
                    return endpoint, found.groupdict()
        if allowed:
            raise ConnectRestError("HTTP 405 Method Not Allowed", 405)
        raise ConnectRestError("HTTP 404 Not Found", 404)


class ConnectApp:
    def __init__(self, herder: Herder, router: Router, auth: BasicAuth | None = None,
                 peer_verify: ssl.SSLContext | bool = True) -> None:
        self.herder, self.router, self.auth = herder, router, auth
        # forwarding to an HTTPS leader checks its certificate (rest_tls.peer_verify)
        self.client = httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S, verify=peer_verify)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        response = await self._respond(scope, body)
        payload = response.encoded()
        headers = [(b"content-length", str(len(payload)).encode()), *response.headers]
        if payload:
            headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": response.status,
                    "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _respond(self, scope: dict[str, Any], body: bytes) -> Response:
        refused = await self._authenticate(scope)
        if refused is not None:
            return refused
        pairs = parse_qsl(scope.get("query_string", b"").decode(), keep_blank_values=True)
        forwarded = any(k == FORWARDED for k, _ in scope.get("headers", []))
        try:
            endpoint, params = self.router.match(scope["method"], scope["path"])
            request = Request(scope["method"], scope["path"], dict(pairs), body, params,
                              self.herder, pairs)
            return await endpoint(request)
        except NotLeader as exc:
            if exc.url is None or forwarded:
                return _error(exc)
            return await self._forward(exc.url, scope, body)
        except ConnectRestError as exc:
            return _error(exc)
        except Exception as exc:  # the outermost handler: a bug answers 500, never a crash
            log.exception("%s %s failed", scope["method"], scope["path"])
            return _error(ConnectRestError(f"{type(exc).__name__}: {exc}", 500))

    async def _authenticate(self, scope: dict[str, Any]) -> Response | None:
        """None when the caller may go on (or auth is off); else the refusal: 401 with
        `WWW-Authenticate`, or 503 when the cluster cannot say."""
        if self.auth is None:
            return None
        header = _header(scope, b"authorization")
        try:
            if self.auth.cached(header) is None:
                await asyncio.to_thread(self.auth.authenticate, header)
        except ConnectRestError as exc:
            refusal = _error(exc)
            if isinstance(exc, Unauthorized):
                refusal.headers.append((b"www-authenticate", self.auth.challenge.encode()))
            return refusal
        return None

    async def _forward(self, url: str, scope: dict[str, Any], body: bytes) -> Response:
        target = url.rstrip("/") + scope["path"]
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode()
        headers = {"content-type": "application/json", FORWARDED.decode(): "true"}
        authorization = _header(scope, b"authorization")
        if authorization is not None:  # the leader authenticates the caller too
            headers["authorization"] = authorization
        try:
            answer = await self.client.request(scope["method"], target, content=body,
                                               headers=headers)
        except httpx.HTTPError as exc:
            return _error(ConnectRestError(f"Error trying to forward REST request: {exc}",
                                           500))
        forwarded = Response(answer.status_code, raw=answer.content)
        if answer.status_code == 401:  # a 401 always says how to authenticate (RFC 9110)
            challenge = answer.headers.get("www-authenticate") or self._challenge()
            forwarded.headers.append((b"www-authenticate", challenge.encode("latin-1")))
        return forwarded

    def _challenge(self) -> str:
        """This worker's Basic challenge; Kafka's default realm when it asks none itself."""
        return self.auth.challenge if self.auth is not None else f'Basic realm="{REALM}"'


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    return next((value.decode("latin-1") for key, value in scope.get("headers", [])
                 if key.lower() == name), None)


def _error(exc: ConnectRestError) -> Response:
    return Response(exc.status, {"error_code": exc.status, "message": exc.message})
