"""The API docs page links two documents, and the control center's covers its JSON API."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver

from controlcenter.api import urls as api_urls


def routes(patterns: list[URLPattern | URLResolver], prefix: str = "/api/v1/") -> set[str]:
    found: set[str] = set()
    for pattern in patterns:
        raw = prefix + re.sub(r"<(?:\w+:)?\w+>", "{}", str(pattern.pattern))
        if isinstance(pattern, URLResolver):
            found |= routes(pattern.url_patterns, raw)
        else:
            found.add(raw.rstrip("/"))
    return found


@pytest.mark.django_db
def test_the_swagger_page_offers_both_documents() -> None:
    page = Client().get("/api/docs/").content.decode()
    assert "/api/schema/" in page and "/api/v1/schema/" in page
    assert "cdn" not in page.lower()


@pytest.mark.django_db
def test_every_control_center_api_route_is_in_its_document() -> None:
    document = Client().get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    documented = {re.sub(r"\{\w+\}", "{}", path).rstrip("/") for path in document["paths"]}
    missing = routes(list(api_urls.urlpatterns)) - documented
    assert not missing, f"API routes missing from /api/v1/schema/: {sorted(missing)}"


@pytest.mark.django_db
def test_the_document_says_how_to_sign_in() -> None:
    document = Client().get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["basic"] == {**schemes["basic"], "type": "http", "scheme": "basic"}
    assert schemes["token"] == {**schemes["token"], "type": "http", "scheme": "bearer"}
    assert schemes["session"]["in"] == "cookie"
    operations = [op for item in document["paths"].values() for op in item.values()]
    assert operations and all(
        {"basic": []} in op["security"] and {"token": []} in op["security"] for op in operations)
