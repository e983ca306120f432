"""The proxy's root: Confluent's `{}` for clients, links for a browser."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.test import Client

from tests.restproxy.conftest import Proxy

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("accept", [None, "*/*", "application/vnd.kafka.v2+json"])
def test_the_proxy_root_answers_clients_with_an_empty_object(proxy: Proxy, accept: str | None
                                                            ) -> None:
    response = proxy.get("", accept=accept)
    assert response.status_code == 200 and json.loads(response.content) == {}


def test_the_proxy_root_gives_a_browser_links(proxy: Proxy) -> None:
    response = proxy.get("", accept=BROWSER)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    links = re.findall(r'href="([^"]+)"', response.content.decode())
    assert f"/{settings.RESTPROXY_PREFIX.rstrip('/')}/topics" in links
    for link in links:
        assert Client().get(link).status_code == 200, link
