"""What a browser gets at the registry's and the REST proxy's root: a short HTML index.

Confluent's registry and REST proxy answer `GET /` with `{}`, and clients (which ask for JSON
or anything) still get exactly that from the apps' own root views. A request for an API's
root that prefers `text/html`, as browsers' Accept does, is answered here instead, before
the app sees it, with links to the app's main read-only resources and to the API
documentation. The apps know nothing of it: which page belongs where is the project's
business, like the ports and prefixes the apps are mounted on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from html import escape
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.cache import patch_vary_headers


@dataclass(frozen=True)
class Index:
    """One API's index page: what it is, its own JSON media type, the links it offers."""

    title: str
    about: str
    media_type: str
    links: tuple[tuple[str, str], ...]


REGISTRY = Index(
    "Millrace schema registry", "The Confluent Schema Registry API.",
    "application/vnd.schemaregistry.v1+json", (
        ("subjects", "registered subjects"),
        ("schemas", "every schema (latest versions)"),
        ("schemas/types", "supported schema types"),
        ("config", "global compatibility level"),
        ("mode", "global mode"),
        ("contexts", "contexts"),
    ))
RESTPROXY = Index(
    "Millrace REST proxy", "The Confluent REST Proxy API, v2 and v3.",
    "application/vnd.kafka.v2+json", (
        ("topics", "topic names (v2)"),
        ("brokers", "broker ids (v2)"),
        ("v3/clusters", "the cluster, its brokers, topics and consumer groups (v3)"),
    ))


def index_at(request: HttpRequest) -> Index | None:
    """The index whose root this request asks for: `/` on the API's own port, or its
    prefix on any port; None for every other request."""
    port, path = str(request.META.get("SERVER_PORT", "")), request.path
    for index, own_port, prefix in ((REGISTRY, settings.REGISTRY_PORT, settings.REGISTRY_PREFIX),
                                    (RESTPROXY, settings.RESTPROXY_PORT,
                                     settings.RESTPROXY_PREFIX)):
        if (path == "/" and port == str(own_port)) or (prefix and path == f"/{prefix}"):
            return index
    return None


def wanted(request: HttpRequest, index: Index) -> bool:
    offered = [index.media_type, "application/json", "text/html"]
    return request.get_preferred_type(offered) == "text/html"


def docs_url(request: HttpRequest) -> str:
    """The OpenAPI page lives on the web port; from an API's own port, link there."""
    host, _, port = request.get_host().rpartition(":")
    if port and port != str(settings.WEB_PORT) and host:
        return f"{request.scheme}://{host}:{settings.WEB_PORT}/api/docs/"
    return "/api/docs/"


def page(request: HttpRequest, index: Index) -> HttpResponse:
    base = request.path.rstrip("/")
    items = "".join(f'<li><a href="{escape(base)}/{path}">{path}</a>: {what}</li>'
                    for path, what in index.links)
    response = HttpResponse(
        f"<!doctype html><html><head><meta charset=utf-8><title>{index.title}</title></head>"
        f"<body><h1>{index.title}</h1><p>{index.about} Clients get <code>{{}}</code> here.</p>"
        f'<ul>{items}</ul><p><a href="{escape(docs_url(request))}">API documentation '
        "(OpenAPI)</a></p></body></html>",
        content_type="text/html; charset=utf-8")
    patch_vary_headers(response, ["Accept"])  # the same URL gives clients `{}`
    return response


class IndexPageMiddleware:
    """Answer a browser at an API's root with its index page; pass everything else on.

    In both MIDDLEWARE and API_MIDDLEWARE, after PortRoutingMiddleware. Async-capable, so
    under ASGI it costs the APIs no hop to a thread; the hot requests never reach it (the
    fast lane answers them before Django)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        index = index_at(request) if request.method in ("GET", "HEAD") else None
        if index is None or not wanted(request, index):
            response: HttpResponseBase | Awaitable[HttpResponseBase] = self.get_response(request)
            return response  # a coroutine when async: the caller awaits it
        answer = page(request, index)
        return _ready(answer) if self.is_async else answer


async def _ready(response: HttpResponseBase) -> HttpResponseBase:
    return response
