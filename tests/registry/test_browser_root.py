"""The registry's root: Confluent's `{}` for clients, links for a browser."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.test import Client

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("accept", [None, "*/*", "application/json",
                                    "application/vnd.schemaregistry.v1+json"])
def test_the_registry_root_answers_clients_with_an_empty_object(db: None, accept: str | None
                                                               ) -> None:
    headers = {"accept": accept} if accept else {}
    response = Client().get(f"/{settings.REGISTRY_PREFIX}", headers=headers)
    assert response.status_code == 200 and json.loads(response.content) == {}


def test_the_registry_root_gives_a_browser_links(db: None) -> None:
    root = f"/{settings.REGISTRY_PREFIX}"
    response = Client().get(root, headers={"accept": BROWSER})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    links = re.findall(r'href="([^"]+)"', response.content.decode())
    assert f"{root.rstrip('/')}/subjects" in links and "/api/docs/" in links
    for link in links:  # every link works
        assert Client().get(link).status_code == 200, link
