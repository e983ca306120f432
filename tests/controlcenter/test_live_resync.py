"""A page's socket that reconnects catches up on what it missed while it was away: the
cluster banner as it stands and the current fragments of the groups it follows. A first
connect gets nothing (the page was just rendered from the same tables)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from channels.testing import WebsocketCommunicator
from playwright.sync_api import expect

from controlcenter.models import ClusterState, GroupState
from millrace.asgi import application
from tests.controlcenter.browser import Browser
from tests.controlcenter.cluster_snapshot import seed
from tests.controlcenter.pages.test_group_browser import cluster_server, tab
from tests.controlcenter.pages.test_group_pages import seed_lagging_group
from tests.controlcenter.test_live import ORIGIN, own_hub

pytestmark = pytest.mark.django_db(transaction=True)
# Fixtures: a channel-layer hub of the test's own; the real app served to Chromium.
__all__ = ["cluster_server", "own_hub", "tab"]
TOPICS = f"groups,{quote('group.billing/eu', safe='')}"


async def connect(query: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, f"/ws/live/?{query}",
                                         headers=[ORIGIN, (b"host", b"127.0.0.1:8000")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


async def received(communicator: WebsocketCommunicator) -> list[dict[str, Any]]:
    messages = []
    while not await communicator.receive_nothing(timeout=0.5):
        messages.append(json.loads(await communicator.receive_from(timeout=10)))
    return messages


@pytest.fixture
def unreachable_cluster_with_a_group() -> None:
    seed(reachable=False)
    seed_lagging_group()


async def test_a_reconnected_page_gets_the_banner_and_the_current_fragments(
        own_hub: str, unreachable_cluster_with_a_group: None) -> None:
    page = await connect(f"topics={TOPICS}&resync=1")
    messages = await received(page)
    await page.disconnect()
    [banner] = [m for m in messages if m["type"] == "banner"]
    assert banner["key"] == "cluster" and banner["active"] and "unreachable" in banner["text"]
    fragments = {m["id"]: m["html"] for m in messages if m["type"] == "fragment"}
    # every fragment of the group's page, its lag-anomaly card too (controlcenter/streams)
    assert set(fragments) == {"group-table", "group-summary", "group-members",
                              "group-partitions", "group-alerts"}
    assert "billing-worker" in fragments["group-members"]
    assert 'data-field="total-lag">150<' in fragments["group-summary"]


async def test_a_first_connect_gets_nothing_until_something_changes(
        own_hub: str, unreachable_cluster_with_a_group: None) -> None:
    page = await connect(f"topics={TOPICS}")
    assert await received(page) == []
    await page.disconnect()


def test_a_page_that_lost_its_socket_shows_what_changed_meanwhile(
        tab: Browser, unreachable_cluster_with_a_group: None) -> None:
    page = tab.page
    tab.visit("/groups/billing/eu/")
    expect(page.locator("#live-indicator")).to_have_attribute("data-state", "live")
    expect(page.locator("#banner-cluster")).to_have_count(1)
    page.evaluate("window.__notReloaded = true")
    # While the socket is down, the cluster comes back and the group's lag changes; the
    # pushes of those changes went to sockets that were open then, not to this page.
    page.evaluate("""async () => {
        const { live } = await import('/static/js/live.js');
        live.stop();
    }""")
    ClusterState.objects.update(reachable=True, last_error="")
    GroupState.objects.filter(group_id="billing/eu").update(total_lag=999)
    page.evaluate("""async () => {
        const { live } = await import('/static/js/live.js');
        live.start();
    }""")
    expect(page.locator('#group-summary [data-field="total-lag"]')).to_have_text("999")
    expect(page.locator("#banner-cluster")).to_have_count(0)
    tab.snap("caught-up")
    assert page.evaluate("window.__notReloaded") is True
