"""The collector renders live pushes only for what a browser has open: the channel layer
(the hub, or Redis) says which event groups have a member, and events.publish_changes
renders the fragments and list rows of those groups only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from controlcenter import events
from tests.brokerproc import REPO
from tests.controlcenter.cluster_snapshot import seed
from tests.controlcenter.test_live import REDIS_URL, connect, hub_layer, redis_layer

pytestmark = pytest.mark.django_db(transaction=True)

CHANGES: list[tuple[str, str | None]] = [
    ("overview", None), ("topics", None), ("topic", "orders"), ("topic", "payments"),
    ("group", "billing"), ("groups", None)]


@pytest.fixture
def own_hub() -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    with override_settings(CHANNEL_LAYERS=hub_layer(name)):
        yield name


@pytest.fixture
def fresh_rows() -> Iterator[events.Rows]:
    rows = events.rows_of("topic")
    assert rows is not None
    rows.sent.clear()  # as in a collector that has just started
    yield rows
    rows.sent.clear()


def occupied_in_another_process(layers: dict[str, object], groups: list[str]) -> list[str]:
    """What a collector process (not the one holding the sockets) learns from the layer."""
    script = (
        "import json, sys, django; django.setup()\n"
        "from django.conf import settings\n"
        "settings.CHANNEL_LAYERS = json.loads(sys.argv[1])\n"
        "from controlcenter import events\n"
        "changed = [(k, v or None) for k, v in (c.split(':', 1) for c in sys.argv[2:])]\n"
        "found = events.followed_groups(changed)\n"
        "print(json.dumps(None if found is None else sorted(found)))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "millrace.settings"}
    done = subprocess.run([sys.executable, "-c", script, json.dumps(layers), *groups],
                          cwd=REPO, env=env, check=True, timeout=120, capture_output=True,
                          text=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


async def test_nothing_is_rendered_while_no_browser_has_a_page_open(
        own_hub: str, fresh_rows: events.Rows) -> None:
    await sync_to_async(seed)({"orders": 3, "payments": 1})
    assert await sync_to_async(events.publish_changes)(CHANGES) == 0
    assert not fresh_rows.sent  # no row went out: the next change of each is a new row


async def test_only_the_open_pages_fragments_are_rendered_and_sent(
        own_hub: str, fresh_rows: events.Rows) -> None:
    await sync_to_async(seed)({"orders": 3, "payments": 1})
    page = await connect("topic.orders")
    sent = await sync_to_async(events.publish_changes)(CHANGES)
    ids = {json.loads(await page.receive_from(timeout=10))["id"] for _ in range(3)}
    assert ids == {"topic-summary", "topic-map", "topic-partitions"}
    assert sent == 3  # orders' three fragments; no row: no list page is open
    assert await page.receive_nothing(timeout=0.3)
    await page.disconnect()


async def test_a_row_skipped_while_no_list_was_open_reaches_a_list_opened_later(
        own_hub: str, fresh_rows: events.Rows) -> None:
    await sync_to_async(seed)({"orders": 3, "payments": 1})
    assert await sync_to_async(events.publish_changes)([("topic", "orders")]) == 0
    listing = await connect("topics")
    assert await sync_to_async(events.publish_changes)([("topic", "orders")]) == 1
    rows = json.loads(await listing.receive_from(timeout=10))
    assert rows["type"] == "rows" and [r["key"] for r in rows["rows"]] == ["orders"]
    assert rows["rows"][0]["html"] is not None
    # Sent once, its next change goes to the row's own group, which this page does not
    # follow: nothing is rendered for it.
    assert await sync_to_async(events.publish_changes)([("topic", "orders")]) == 0
    # A gone topic still reaches the list, so that an open page removes its row.
    assert await sync_to_async(events.publish_changes)([("topic", "gone")]) == 1
    gone = json.loads(await listing.receive_from(timeout=10))
    assert gone["rows"] == [{"key": "gone", "html": None}]
    await listing.disconnect()


async def test_a_collector_in_another_process_learns_the_open_groups_from_the_hub(
        own_hub: str) -> None:
    page = await connect("topic.orders")  # this process binds the hub
    layers = hub_layer(own_hub)
    asked = ["topic:orders", "topic:payments", "overview:"]
    found = await sync_to_async(occupied_in_another_process)(layers, asked)
    # topic.orders is followed; the rows' groups of topics (topics, topics.orders) are not
    assert found == ["topic.orders"]
    await page.disconnect()
    assert await sync_to_async(occupied_in_another_process)(layers, asked) == []


async def test_a_collector_learns_the_open_groups_from_redis() -> None:
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping()
    except redis.exceptions.ConnectionError:
        pytest.fail(f"Redis is not running at {REDIS_URL}")
    layers = redis_layer(f"millrace-test-{uuid.uuid4().hex[:8]}")
    with override_settings(CHANNEL_LAYERS=layers):
        page: WebsocketCommunicator = await connect("topics,group.billing")
        asked = ["group:billing", "group:other", "topics:", "topic:orders"]
        found = await sync_to_async(occupied_in_another_process)(layers, asked)
        assert found == ["group.billing", "topics"]
        await page.disconnect()
        assert await sync_to_async(occupied_in_another_process)(layers, asked) == []
