"""The APIs' index pages on their own ports: a browser at `http://host:8081/` gets the
registry's links (the prefixes on the web port: tests/registry/test_browser_root.py and
tests/restproxy/test_browser_root.py), a client gets Confluent's `{}`."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def get(port: int, path: str, accept: str) -> Any:  # the test client's response
    """GET through Django's test client as a request arriving on `port`."""
    return Client().get(path, headers={"accept": accept}, SERVER_PORT=str(port),
                        HTTP_HOST=f"127.0.0.1:{port}")


def test_a_browser_at_the_registry_s_own_port_gets_links_that_work(db: None) -> None:
    response = get(settings.REGISTRY_PORT, "/", BROWSER)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert "Accept" in response["Vary"]
    links = re.findall(r'href="([^"]+)"', response.content.decode())
    assert f"http://127.0.0.1:{settings.WEB_PORT}/api/docs/" in links
    assert "/subjects" in links
    for link in links[:-1]:  # the API's own; the last is the docs page on the web port
        assert get(settings.REGISTRY_PORT, link, "*/*").status_code == 200, link


@pytest.mark.parametrize("port, title", [("REGISTRY_PORT", "schema registry"),
                                         ("RESTPROXY_PORT", "REST proxy")])
def test_each_api_root_gives_clients_an_empty_object_and_browsers_their_own_page(
    db: None, port: str, title: str
) -> None:
    answer = get(getattr(settings, port), "/", "application/json")
    assert answer.status_code == 200 and json.loads(answer.content) == {}
    page = get(getattr(settings, port), "/", BROWSER)
    assert f"<h1>Millrace {title}</h1>" in page.content.decode()


def test_only_an_api_s_root_is_an_index(db: None) -> None:
    """A page of the control center, and the web port's root, are never taken for one."""
    response = Client().get("/", headers={"accept": BROWSER})
    assert "Clients get" not in response.content.decode()
