"""The overview on the shared layout, against a real broker and against none, each after
one real collector cycle (the overview shows the collector's read model)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from django.test.utils import override_settings
from playwright.sync_api import expect

from brokercluster.ports import free_port
from clusterclient import ClusterClient
from millrace import asgi
from tests.controlcenter.browser import Browser, serve
from tests.controlcenter.pages.test_overview import collect_once


def collect_in_thread(bootstrap: str) -> None:
    """One collector cycle on a thread of its own: this one runs Playwright's event loop,
    where the collector's publishing (async_to_sync) cannot run."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(collect_once, bootstrap).result()


@pytest.fixture
def open_browser(chromium: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    tabs: list[Browser] = []

    def open_on(server: Any) -> Browser:
        tabs.append(Browser(chromium, server, request.node.name))
        return tabs[-1]

    yield open_on
    for tab in tabs:
        tab.close()
        assert not tab.errors, tab.errors


def commit_group(bootstrap: str) -> str:
    """A consumer group that exists because it committed an offset (no member needed)."""
    topic, group = f"overview-{uuid.uuid4().hex[:8]}", f"overview-group-{uuid.uuid4().hex[:8]}"
    ClusterClient(bootstrap).create_topic(topic, partitions=1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    return group


def test_the_overview_shows_the_brokers_inside_the_layout(
    kafka_bootstrap: str, open_browser: Any, django_db_blocker: Any
) -> None:
    commit_group(kafka_bootstrap)
    with django_db_blocker.unblock(), override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):
        collect_in_thread(kafka_bootstrap)
    with django_db_blocker.unblock(), serve(
        lambda: asgi.application, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap
    ) as server:
        browser = open_browser(server)
        browser.visit("/")
        expect(browser.page.locator("h1")).to_have_text("Cluster overview")
        expect(browser.page.locator("#broker-table tbody tr[data-status=up]")).to_have_count(1)
        expect(browser.page.locator(".main-nav a.active")).to_have_text("Overview")
        expect(browser.page.locator(".cluster-label")).to_contain_text(kafka_bootstrap)
        # Each group in trouble links to its page.
        rows = browser.page.locator("#groups-in-trouble tbody tr")
        expect(rows.first.locator("td:first-child a")).to_have_count(1)
        assert rows.locator("td:first-child a").count() == rows.count()
        name = rows.first.locator("td:first-child").inner_text()
        rows.first.locator("td:first-child a").click()
        expect(browser.page.locator("h1")).to_have_text(name)


def test_the_overview_says_when_the_cluster_is_unreachable(
    open_browser: Any, django_db_blocker: Any
) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    with django_db_blocker.unblock(), override_settings(KAFKA_BOOTSTRAP_SERVERS=nobody):
        collect_in_thread(nobody)
    with django_db_blocker.unblock(), serve(
        lambda: asgi.application, KAFKA_BOOTSTRAP_SERVERS=nobody
    ) as server:
        browser = open_browser(server)
        browser.visit("/")
        expect(browser.page.locator("[role=alert]")).to_contain_text(
            "The cluster is unreachable")
