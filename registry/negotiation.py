"""Confluent's media types: what request bodies may be and what responses are."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.settings import api_settings

V1 = "application/vnd.schemaregistry.v1+json"
VND = "application/vnd.schemaregistry+json"
JSON = "application/json"
OCTET_STREAM = "application/octet-stream"


class V1Renderer(JSONRenderer):
    media_type = V1


class VendorRenderer(JSONRenderer):
    media_type = VND


class JsonRenderer(JSONRenderer):
    media_type = JSON


class V1Parser(JSONParser):
    media_type = V1


class VendorParser(JSONParser):
    media_type = VND


class OctetStreamParser(JSONParser):
    media_type = OCTET_STREAM


# Confluent's order of preference when the client accepts several.
RENDERERS = [V1Renderer, VendorRenderer, JsonRenderer]
PARSERS = [V1Parser, VendorParser, JSONParser, OctetStreamParser]


class _Settings:
    """DRF's settings without its `?format=` override: `format` is Confluent's parameter
    (`serialized` for Protobuf), not a choice of renderer."""

    URL_FORMAT_OVERRIDE = None

    def __getattr__(self, name: str) -> Any:
        return getattr(api_settings, name)


class RegistryNegotiation(DefaultContentNegotiation):
    """A body without a Content-Type is read as JSON, as Confluent's server reads it.

    The renderer chosen for an Accept header is remembered: clients send the same few
    headers, and DRF's parsing of them is a good part of a cached read's cost.
    """

    settings = _Settings()  # type: ignore[assignment]  # duck-typed like DRF's

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> Any:
        if not request.content_type:
            return next(iter(parsers))
        return super().select_parser(request, parsers)

    def select_renderer(self, request: Request, renderers: Iterable[BaseRenderer],
                        format_suffix: str | None = None) -> tuple[BaseRenderer, str]:
        renderers = list(renderers)
        key = (request.META.get("HTTP_ACCEPT", ""), format_suffix,
               tuple(type(r) for r in renderers))
        chosen = _chosen_renderers.get(key)
        if chosen is None:
            renderer, media_type = super().select_renderer(request, renderers, format_suffix)
            chosen = (renderers.index(renderer), media_type)
            if len(_chosen_renderers) >= 1024:
                _chosen_renderers.clear()
            _chosen_renderers[key] = chosen
        return renderers[chosen[0]], chosen[1]


_chosen_renderers: dict[tuple[Any, ...], tuple[int, str]] = {}
