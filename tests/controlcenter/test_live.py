"""The live websocket: pages join event groups and get what is published, from any process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import override_settings

from controlcenter import events
from millrace.asgi import application
from tests.brokerproc import REPO

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


def hub_layer(name: str) -> dict[str, object]:
    return {"default": {"BACKEND": "millrace.channelhub.HubChannelLayer",
                        "CONFIG": {"data_dir": str(settings.DATA_DIR), "name": name}}}


def redis_layer(prefix: str) -> dict[str, object]:
    return {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                        "CONFIG": {"hosts": [REDIS_URL], "prefix": prefix}}}


REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

# Connecting runs Channels' auth middleware, which looks up the session's user in the database
# (and closes stale connections first): each socket is a real page's socket.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def own_hub() -> Iterator[str]:
    """A hub of this test's own, so that parallel runs never share groups."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    with override_settings(CHANNEL_LAYERS=hub_layer(name)):
        yield name


async def connect(topics: str, origin: tuple[bytes, bytes] = ORIGIN) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, f"/ws/live/?topics={topics}",
                                         headers=[origin, (b"host", b"127.0.0.1:8000")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


async def test_a_page_receives_the_fragments_of_the_groups_it_joined(own_hub: str) -> None:
    page = await connect("overview,topic.orders")
    other = await connect("topic.payments")
    await events.asend_all([(events.group_name("topic", "orders"),
                             events.fragment_message("partitions", "<table>3</table>"))])
    message = json.loads(await page.receive_from(timeout=10))
    assert message == {"type": "fragment", "id": "partitions", "html": "<table>3</table>"}
    assert await other.receive_nothing(timeout=0.3)
    await page.disconnect()
    await other.disconnect()


async def test_every_page_gets_the_cluster_banner(own_hub: str) -> None:
    pages = [await connect("overview"), await connect("group.my%20group")]
    await events.asend_all([("cluster", events.banner_message("error", "cluster unreachable"))])
    for page in pages:
        assert json.loads(await page.receive_from(timeout=10))["type"] == "banner"
        await page.disconnect()


async def test_group_ids_that_channels_cannot_spell_still_get_their_own_group(
        own_hub: str) -> None:
    page = await connect("group.my%20group%2Fwith%20%E2%9C%93")
    group = events.group_name("group", "my group/with ✓")
    assert group.startswith("group._")
    await events.asend_all([(group, events.fragment_message("lag", "<p>7</p>"))])
    assert json.loads(await page.receive_from(timeout=10))["html"] == "<p>7</p>"
    await page.disconnect()


async def test_a_socket_from_another_origin_is_refused(own_hub: str) -> None:
    communicator = WebsocketCommunicator(application, "/ws/live/?topics=overview",
                                         headers=[(b"origin", b"http://evil.example"),
                                                  (b"host", b"127.0.0.1:8000")])
    connected, _ = await communicator.connect(timeout=10)
    assert not connected


async def test_an_unknown_event_group_is_refused(own_hub: str) -> None:
    communicator = WebsocketCommunicator(application, "/ws/live/?topics=secrets",
                                         headers=[ORIGIN, (b"host", b"127.0.0.1:8000")])
    connected, code = await communicator.connect(timeout=10)
    assert not connected
    assert code == 4400


def publish_from_another_process(layers: dict[str, object], group: str, text: str) -> None:
    """`manage.py shell`-like: a fresh interpreter with the given layer publishes once."""
    script = (
        "import json, sys, django; django.setup()\n"
        "from django.conf import settings\n"
        "settings.CHANNEL_LAYERS = json.loads(sys.argv[1])\n"
        "from controlcenter import events\n"
        "events.publish(sys.argv[2], sys.argv[3])\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "millrace.settings"}
    subprocess.run([sys.executable, "-c", script, json.dumps(layers), group, text],
                   cwd=REPO, env=env, check=True, timeout=60)


async def test_a_publish_from_another_process_reaches_the_page_over_the_hub(
        own_hub: str) -> None:
    page = await connect("brokers")  # this process binds the hub; the publisher connects
    text = events.fragment_message("broker-2", "<tr>down</tr>")
    await _in_thread(publish_from_another_process, hub_layer(own_hub), "brokers", text)
    assert await page.receive_from(timeout=10) == text
    await page.disconnect()


async def test_pages_keep_receiving_after_the_hub_process_exits(own_hub: str) -> None:
    """A publisher that became the hub exits; this process takes over the name."""
    other_hub = f"{own_hub}-takeover"
    layers = hub_layer(other_hub)
    script = (
        "import json, sys, time, django; django.setup()\n"
        "from django.conf import settings\n"
        "settings.CHANNEL_LAYERS = json.loads(sys.argv[1])\n"
        "from channels.layers import get_channel_layer\n"
        "from asgiref.sync import async_to_sync\n"
        "async_to_sync(get_channel_layer().group_send)('cluster', {'type': 'x'})\n"
        "print('hub', flush=True); sys.stdin.readline()\n"
    )
    hub = start_process(script, json.dumps(layers))
    try:
        assert hub.stdout is not None and hub.stdout.readline().strip() == "hub"
        with override_settings(CHANNEL_LAYERS=layers):
            page = await connect("overview")
            hub.kill()  # no clean goodbye: the kernel frees the name
            hub.wait()
            text = events.fragment_message("cluster-health", "<p>after</p>")
            await _in_thread(publish_from_another_process, layers, "overview", text)
            assert await page.receive_from(timeout=15) == text
            await page.disconnect()
    finally:
        hub.kill()
        hub.wait()


async def test_a_publish_from_another_process_reaches_the_page_over_redis() -> None:
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping()
    except redis.exceptions.ConnectionError:
        pytest.fail(f"Redis is not running at {REDIS_URL}")
    layers = redis_layer(f"millrace-test-{uuid.uuid4().hex[:8]}")
    with override_settings(CHANNEL_LAYERS=layers):
        page = await connect("groups")
        text = events.fragment_message("groups-table", "<tr>g1</tr>")
        await _in_thread(publish_from_another_process, layers, "groups", text)
        assert await page.receive_from(timeout=30) == text
        await page.disconnect()


def start_process(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "millrace.settings"}
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


async def _in_thread(func: object, *args: object) -> None:
    import asyncio

    await asyncio.to_thread(func, *args)  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)
async def test_the_topic_list_gets_the_rows_of_changed_topics_rendered_once(
        own_hub: str, settings: object) -> None:
    """Created and changed topics travel as rows to the list's group, deleted ones as
    null; topic pages get their own fragments, not the rows."""
    from asgiref.sync import sync_to_async

    from tests.controlcenter.cluster_snapshot import seed

    await sync_to_async(seed)({"orders": 3, "payments": 1})
    rows_of_topics = events.rows_of("topic")
    assert rows_of_topics is not None
    rows_of_topics.sent.clear()  # as in a collector that has just started
    listing, topic_page = await connect("topics"), await connect("topic.orders")
    sent = await sync_to_async(events.publish_changes)(
        [("topics", None), ("topic", "orders"), ("topic", "gone")])
    count = json.loads(await listing.receive_from(timeout=10))
    assert count["id"] == "topic-count" and ">2<" in count["html"]
    rows = json.loads(await listing.receive_from(timeout=10))
    assert rows["type"] == "rows" and rows["table"] == "topic-table"
    orders, gone = rows["rows"]
    assert orders["key"] == "orders" and 'data-key="orders"' in orders["html"]
    found = re.search(r'data-values="([^"]*)"', orders["html"])
    assert found and json.loads(found[1].replace("&quot;", '"'))["partitions"] == 3
    assert gone == {"key": "gone", "html": None}
    assert await listing.receive_nothing(timeout=0.3)
    fragments = {json.loads(await topic_page.receive_from(timeout=10))["id"] for _ in range(3)}
    assert fragments == {"topic-summary", "topic-map", "topic-partitions"}
    # The count, one batch of rows, the three fragments of orders; none of "gone", whose
    # page nobody has open.
    assert sent == 5

    # Sent once, the row of orders goes to its own group from then on: the page showing it
    # follows that group; another page of the list does not get it.
    other = await connect("topics")
    await listing.send_to(text_data=json.dumps({"type": "subscribe", "topics": ["topics.orders"]}))
    assert await listing.receive_nothing(timeout=0.5)  # (no answer; time to join the group)
    await sync_to_async(events.publish_changes)([("topic", "orders")])
    row = json.loads(await listing.receive_from(timeout=10))
    assert row["type"] == "rows" and [r["key"] for r in row["rows"]] == ["orders"]
    assert await other.receive_nothing(timeout=0.3)
    await listing.send_to(text_data=json.dumps({"type": "unsubscribe",
                                                "topics": ["topics.orders", "cluster"]}))
    assert await listing.receive_nothing(timeout=0.5)
    await sync_to_async(events.publish_changes)([("topic", "orders")])
    await events.asend_all([("cluster", events.banner_message("ok", "still here"))])
    assert json.loads(await listing.receive_from(timeout=10))["type"] == "banner"
    for page in (listing, topic_page, other):
        await page.disconnect()


async def test_an_anonymous_socket_is_refused_when_pages_need_a_login(own_hub: str) -> None:
    with override_settings(MILLRACE_UI_LOGIN_REQUIRED=True):
        communicator = WebsocketCommunicator(application, "/ws/live/?topics=overview",
                                             headers=[ORIGIN, (b"host", b"127.0.0.1:8000")])
        connected, code = await communicator.connect(timeout=10)
    assert not connected and code == 4401


@pytest.mark.parametrize("request_, words", [
    ({"type": "tail", "topic": "no spaces allowed"}, "is not a topic name"),
    ({"type": "tail", "topic": "orders", "filters": {"partition": "-1"}}, "partition"),
    ({"type": "tail", "topic": "orders", "positions": "0:x"}, "partition:offset pairs"),
])
async def test_a_tail_request_that_does_not_fit_the_form_gets_the_tail_banner(
        own_hub: str, request_: dict[str, object], words: str) -> None:
    page = await connect("topic.orders")
    await page.send_to(text_data=json.dumps(request_))
    message = json.loads(await page.receive_from(timeout=10))
    assert message["type"] == "banner" and message["key"] == "tail", message
    assert message["text"].startswith("Live tail refused: ") and words in message["text"]
    await page.send_to(text_data="not json")  # ignored, like any other stray frame
    assert await page.receive_nothing(timeout=0.3)
    await page.disconnect()
