"""Forward a consumer-instance request to the proxy process that owns the instance."""

from __future__ import annotations

import httpx
from django.http import HttpResponse
from django.urls import reverse
from rest_framework.request import Request

from . import errors
from .api import read_body

FORWARDED_HEADER = "X-Millrace-Forwarded"
FORWARD_TIMEOUT = 120.0

_client: httpx.Client | None = None


def is_forwarded(request: Request) -> bool:
    return bool(request.META.get("HTTP_X_MILLRACE_FORWARDED"))


def mount_relative(request: Request) -> str:
    """The request path below the proxy's mount point ('topics/t', 'consumers/g/...')."""
    root = reverse("restproxy:root")
    return request.path[len(root):] if request.path.startswith(root) else request.path


def forward(request: Request, owner_url: str) -> HttpResponse:
    global _client
    if _client is None:
        _client = httpx.Client(timeout=FORWARD_TIMEOUT)
    url = f"{owner_url.rstrip('/')}/{mount_relative(request)}"
    query = request.META.get("QUERY_STRING")
    if query:
        url = f"{url}?{query}"
    headers = {FORWARDED_HEADER: "1"}
    for meta, name in (("CONTENT_TYPE", "Content-Type"), ("HTTP_ACCEPT", "Accept")):
        if request.META.get(meta):
            headers[name] = request.META[meta]
    try:
        answer = _client.request(request.method or "GET", url, content=read_body(request),
                                 headers=headers)
    except httpx.HTTPError as exc:
        raise errors.forward_failed(str(exc)) from exc
    return HttpResponse(answer.content, status=answer.status_code,
                        content_type=answer.headers.get("content-type"))
