"""Forward a consumer-instance request to the proxy process that owns the instance."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator

import httpx
from asgiref.sync import async_to_sync
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.urls import reverse
from rest_framework.request import Request

from restproxy import errors
from restproxy.api import Later, read_body

FORWARDED_HEADER = "X-Millrace-Forwarded"
FORWARD_TIMEOUT = 120.0


def is_forwarded(request: Request) -> bool:
    return bool(request.META.get("HTTP_X_MILLRACE_FORWARDED"))


def mount_relative(request: Request) -> str:
    """The request path below the proxy's mount point ('topics/t', 'consumers/g/...')."""
    lane_path: str | None = getattr(request, "mount_path", None)  # the fast lane's request
    if lane_path is not None:
        return lane_path
    root = reverse("restproxy:root")
    return request.path[len(root):] if request.path.startswith(root) else request.path


def _target(request: Request, owner_url: str) -> tuple[str, dict[str, str]]:
    url = f"{owner_url.rstrip('/')}/{mount_relative(request)}"
    query = request.META.get("QUERY_STRING")
    if query:
        url = f"{url}?{query}"
    headers = {FORWARDED_HEADER: "1"}
    for meta, name in (("CONTENT_TYPE", "Content-Type"), ("HTTP_ACCEPT", "Accept"),
                       ("HTTP_AUTHORIZATION", "Authorization")):  # the owner authenticates too
        if request.META.get(meta):
            headers[name] = request.META[meta]
    return url, headers


def forward(request: Request, owner_url: str) -> Later:
    """The owner's answer, relayed; the call is made on the event loop (api.Later)."""
    url, headers = _target(request, owner_url)
    method, body = request.method or "GET", read_body(request)

    async def answer() -> HttpResponse:
        try:
            reply = await _client().request(method, url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise errors.forward_failed(str(exc)) from exc
        return HttpResponse(reply.content, status=reply.status_code,
                            content_type=reply.headers.get("content-type"))

    return Later(answer)


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary())


def _client() -> httpx.AsyncClient:
    """One pooled client per event loop (a server worker has one; tests make several)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = httpx.AsyncClient(timeout=FORWARD_TIMEOUT)
    return client


def forward_stream(request: Request, owner_url: str) -> HttpResponseBase:
    """Relay a streaming GET from the owner chunk by chunk.

    Called on a view's worker thread; the upstream connection is opened and read on the
    server's event loop, so closing the client's connection here closes the one to the
    owner, which ends the owner's stream.
    """
    url, headers = _target(request, owner_url)
    client, answer = async_to_sync(_open_stream)(url, headers)
    content_type = answer.headers.get("content-type")
    if answer.status_code != 200:
        body = async_to_sync(_read_all)(client, answer)
        return HttpResponse(body, status=answer.status_code, content_type=content_type)
    return StreamingHttpResponse(_relay(client, answer), content_type=content_type)


async def _open_stream(url: str, headers: dict[str, str]
                       ) -> tuple[httpx.AsyncClient, httpx.Response]:
    client = httpx.AsyncClient(timeout=httpx.Timeout(FORWARD_TIMEOUT, read=None))
    try:
        answer = await client.send(client.build_request("GET", url, headers=headers),
                                   stream=True)
    except httpx.HTTPError as exc:
        await client.aclose()
        raise errors.forward_failed(str(exc)) from exc
    return client, answer


async def _read_all(client: httpx.AsyncClient, answer: httpx.Response) -> bytes:
    try:
        return await answer.aread()
    finally:
        await answer.aclose()
        await client.aclose()


async def _relay(client: httpx.AsyncClient, answer: httpx.Response) -> AsyncIterator[bytes]:
    try:
        yield b""  # the headers now (see stream.stream_records)
        async for chunk in answer.aiter_bytes():
            yield chunk
    except httpx.HTTPError:
        return  # the owner went away: the stream simply ends
    finally:
        await answer.aclose()
        await client.aclose()
