"""What a browser gets at the registry's root: a short HTML index instead of `{}`.

Confluent's registry answers `GET /` with `{}`, and clients (which ask for JSON or anything)
still get exactly that; only a request that prefers `text/html`, as browsers' Accept does,
gets links to the main read-only resources and to the API documentation.
"""

from __future__ import annotations

from html import escape

from django.conf import settings
from django.http import HttpRequest, HttpResponse

LINKS = [
    ("subjects", "registered subjects"),
    ("schemas", "every schema (latest versions)"),
    ("schemas/types", "supported schema types"),
    ("config", "global compatibility level"),
    ("mode", "global mode"),
    ("contexts", "contexts"),
]


def wanted(request: HttpRequest) -> bool:
    offered = ["application/vnd.schemaregistry.v1+json", "application/json", "text/html"]
    return request.get_preferred_type(offered) == "text/html"


def docs_url(request: HttpRequest) -> str:
    """The OpenAPI page lives on the web port; from the registry's own port, link there."""
    host, _, port = request.get_host().rpartition(":")
    if port and port != str(settings.WEB_PORT) and host:
        return f"{request.scheme}://{host}:{settings.WEB_PORT}/api/docs/"
    return "/api/docs/"


def page(request: HttpRequest) -> HttpResponse:
    base = request.path.rstrip("/")
    items = "".join(f'<li><a href="{escape(base)}/{path}">{path}</a>: {what}</li>'
                    for path, what in LINKS)
    return HttpResponse(
        "<!doctype html><html><head><meta charset=utf-8><title>Millrace schema registry"
        "</title></head><body><h1>Millrace schema registry</h1><p>The Confluent Schema "
        f"Registry API. Clients get <code>{{}}</code> here.</p><ul>{items}</ul><p><a "
        f'href="{escape(docs_url(request))}">API documentation (OpenAPI)</a></p></body></html>',
        content_type="text/html; charset=utf-8")
