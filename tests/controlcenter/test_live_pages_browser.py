"""The topic list's live rows, the Messages page's live tail and the layout of long pages,
in real Chromium against the real ASGI app (Daphne in its own process) over the test
database and the session's broker. Pushes come from this process over the channel hub, as
the collector sends them. Screenshots: var/screenshots/<test name>/."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import Producer
from django.test import override_settings
from django.utils import timezone
from playwright.sync_api import expect

from controlcenter import events
from controlcenter.models import (
    BurrowStatus,
    GroupPartitionLag,
    GroupState,
    PartitionState,
    TopicState,
)
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.cluster_snapshot import seed
from tests.controlcenter.test_live import hub_layer
from tests.controlcenter.test_messagebrowser import create


@pytest.fixture(scope="module")
def app_server(django_db_setup: None, kafka_bootstrap: str) -> Iterator[LiveServer]:
    """The project's ASGI app over the test database, on the session broker, sharing a hub
    of its own with this process."""
    layers = hub_layer(f"test-{uuid.uuid4().hex[:12]}")
    with override_settings(CHANNEL_LAYERS=layers, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), \
            serve("millrace.asgi:application") as server:
        yield server


@pytest.fixture
def tab(chromium: Any, app_server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:
    """A fresh browser on the app; the module's settings (hub, broker) hold here too."""
    browser = Browser(chromium, app_server, request.node.name)
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


def publish(changed: list[tuple[str, str | None]]) -> None:
    """As the collector does; on a thread of its own, since Playwright's loop runs here."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(events.publish_changes, changed).result(timeout=30)


def topic_names(tab: Browser, page: Any = None) -> list[str]:
    return list((page or tab.page).locator("#topic-table tbody tr[data-key]").evaluate_all(
        "rows => rows.map(r => r.dataset.key)"))


def test_pushed_rows_are_placed_by_each_pages_order_filter_and_page(tab: Browser) -> None:
    seed({f"t{i:03}": 1 for i in range(0, 120, 2)})  # t000, t002, ... t118: 60 topics
    tab.visit("/topics/")
    by_name = tab.page
    assert topic_names(tab)[:3] == ["t000", "t002", "t004"] and len(topic_names(tab)) == 50
    by_name.evaluate("window.__notReloaded = true")
    newest_first = tab.context.new_page()
    newest_first.goto("/topics/?sort=-name")
    assert topic_names(tab, newest_first)[0] == "t118"

    now = timezone.now()
    for name in ("t003", "t999"):
        TopicState.objects.create(name=name, partitions=4, replication_factor=3,
                                  updated_at=now)
    TopicState.objects.filter(name="t010").delete()
    TopicState.objects.filter(name="t020").update(under_replicated=1, partitions=7)
    publish([("topics", None), *(("topic", t) for t in ("t003", "t999", "t010", "t020"))])

    # By name, page 1 of 2: t003 goes in its place and hands t098 on to page 2; t999 sorts
    # on page 2; t010 is gone; t020 changed in place.
    expect(by_name.locator("#topic-table tr[data-key=t003]")).to_have_count(1)
    names = topic_names(tab)
    assert names[:6] == ["t000", "t002", "t003", "t004", "t006", "t008"]
    assert "t010" not in names and "t098" not in names and "t999" not in names
    assert len(names) == 49
    changed = by_name.locator("#topic-table tr[data-key=t020]")
    expect(changed.locator("[data-column=under-replicated]")).to_have_text("1")
    expect(changed).to_have_class(re.compile("warn"))
    expect(by_name.locator("#topic-count")).to_have_text("61")
    tab.snap("by name after the push")
    assert by_name.evaluate("window.__notReloaded") is True

    # Newest name first: t999 leads; t003 belongs to page 2.
    expect(newest_first.locator("#topic-table tbody tr").first).to_have_attribute(
        "data-key", "t999")
    assert "t003" not in topic_names(tab, newest_first)

    # t999 handed t020 on to page 2 of the newest-first view. Sent before, t020's next
    # change travels in its row's own group, which the page by name follows since it
    # shows it.
    assert "t020" not in topic_names(tab, newest_first)
    TopicState.objects.filter(name="t020").update(under_replicated=2)
    publish([("topics", None), ("topic", "t020")])
    expect(by_name.locator("#topic-table tr[data-key=t020] [data-column=under-replicated]")
           ).to_have_text("2")
    newest_first.screenshot(path=str(tab.shots / "newest-first-after-the-push.png"),
                            full_page=True)
    newest_first.close()


def test_a_search_shows_only_pushed_rows_that_match_it(tab: Browser) -> None:
    seed({"orders": 1, "payments": 1})
    tab.visit("/topics/?q=ord")
    now = timezone.now()
    for name in ("orders-eu", "refunds"):
        TopicState.objects.create(name=name, partitions=1, replication_factor=1,
                                  updated_at=now)
    publish([("topics", None), ("topic", "orders-eu"), ("topic", "refunds")])
    expect(tab.page.locator("#topic-table tr[data-key=orders-eu]")).to_have_count(1)
    assert topic_names(tab) == ["orders", "orders-eu"]
    tab.snap("search after the push")


def seed_wide_group(group_id: str, partitions: int) -> None:
    now = timezone.now()
    GroupState.objects.create(group_id=group_id, state="Stable", members=1, topics=1,
                              partitions=partitions, total_lag=partitions, max_lag=1,
                              status=BurrowStatus.OK, updated_at=now)
    GroupPartitionLag.objects.bulk_create(
        GroupPartitionLag(group_id=group_id, topic="orders", partition=p, committed_offset=9,
                          end_offset=10, lag=1, status=BurrowStatus.OK,
                          consumer_id="consumer-1", client_id="worker", host="/127.0.0.1",
                          updated_at=now)
        for p in range(partitions))


def test_the_sidebar_runs_the_whole_height_of_long_pages(tab: Browser) -> None:
    seed({f"t{i:03}": 1 for i in range(120)})
    seed_wide_group("wide", 80)
    for path in ("/topics/", "/groups/wide/"):
        tab.visit(path)
        page_height = tab.page.evaluate("document.documentElement.scrollHeight")
        assert page_height > 2 * 860, "the page is not long enough to show the fault"
        sidebar = tab.page.locator(".sidebar").bounding_box()
        assert sidebar is not None and sidebar["height"] >= page_height - 1, path
        # Scrolled to the bottom, the navigation is still in view.
        tab.page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        nav = tab.page.locator(".main-nav").bounding_box()
        assert nav is not None and 0 <= nav["y"] < 860, (path, nav)
        tab.page.screenshot(path=str(tab.shots / f"{path.strip('/').replace('/', '-')}"
                                                 "-scrolled.png"))
        tab.page.evaluate("window.scrollTo(0, 0)")
        tab.page.emulate_media(color_scheme="dark")
        tab.snap(f"{path} dark")
        tab.page.emulate_media(color_scheme="light")


def test_records_produced_appear_in_the_open_tail_in_order_without_polling(
        tab: Browser, kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0})
    producer.produce(topic, b"before the page")
    producer.flush(10)
    tab.visit(f"/topics/{topic}/messages/")
    teas = tab.context.new_page()  # a second browser tails the same topic, filtered
    teas.goto(f"/topics/{topic}/messages/?value=tea")
    requests: list[str] = []
    for page in (tab.page, teas):
        page.on("request", lambda request: requests.append(request.url))
        expect(page.locator("#live-indicator")).to_have_attribute("data-state", "live")
        page.check("#live-tail")

    drinks = ["green tea", "coffee", "black tea", "water", "oolong tea", "espresso"]
    for drink in drinks:
        producer.produce(topic, drink.encode(), key=b"order")
    producer.flush(10)

    tailed = tab.page.locator("#message-rows tr.tailed")
    expect(tailed).to_have_count(len(drinks), timeout=30_000)
    offsets = tailed.evaluate_all("rows => rows.map(r => Number(r.dataset.offset))")
    assert offsets == list(range(len(drinks), 0, -1))  # newest on top, none missing
    assert [v.strip() for v in tailed.locator("td:nth-child(5) pre").all_inner_texts()] == \
        list(reversed(drinks))
    assert "before the page" in tab.page.inner_text("#message-rows tr:not(.tailed)")
    tab.snap("tailed")
    teas_tailed = teas.locator("#message-rows tr.tailed")
    expect(teas_tailed).to_have_count(3, timeout=30_000)
    assert "coffee" not in teas.inner_text("#message-rows")
    teas.screenshot(path=str(tab.shots / "tailed-teas.png"), full_page=True)

    # Unticked, the page gets nothing more; and no request was ever made to poll.
    # (The pause lets the untail request reach the server; the later tea, on the same
    # partition, proves the tail read past the record the unticked page must not get.)
    tab.page.uncheck("#live-tail")
    tab.page.wait_for_timeout(1000)
    producer.produce(topic, b"after unticking")
    producer.produce(topic, b"late tea")
    producer.flush(10)
    expect(teas_tailed).to_have_count(4, timeout=30_000)
    assert "after unticking" not in tab.page.inner_text("#message-rows")
    assert requests == [], requests
    teas.close()


def test_a_tail_of_a_topic_that_is_gone_says_so_and_unticks(tab: Browser,
                                                           kafka_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    topic = create(kafka_bootstrap)
    tab.visit(f"/topics/{topic}/messages/")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.delete_topics([topic])[topic].result(10)
    # A click, not check(): check() asserts the box is ticked after the click, and the
    # page may already have unticked it on the server's refusal (a loaded run saw that).
    tab.page.click("#live-tail")
    expect(tab.page.locator("#banner-tail")).to_contain_text("UNKNOWN_TOPIC_OR_PART",
                                                              timeout=30_000)
    expect(tab.page.locator("#live-tail")).not_to_be_checked()
    tab.snap("tail refused")


def test_an_open_topic_page_says_when_its_topic_is_gone(tab: Browser) -> None:
    seed({"orders": 3})
    tab.visit("/topics/orders/")
    TopicState.objects.filter(name="orders").delete()  # as the collector's store does
    PartitionState.objects.filter(topic="orders").delete()
    publish([("topics", None), ("topic", "orders")])
    expect(tab.page.locator("#topic-summary")).to_contain_text("no longer exists")
    tab.snap("deleted")
