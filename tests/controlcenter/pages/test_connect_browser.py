"""The Kafka Connect page in real Chromium against the real app (Daphne in its own process)
and a real Connect worker on the session broker: a datagen connector is created from its
plugin's form (a first submit refused with the worker's error under its field), paused
from its page, and a second tab left open on the connector list sees the state turn
PAUSED without a reload. Screenshots: var/screenshots/<test name>/."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from playwright.sync_api import expect

from controlcenter.models import AuditEntry
from tests.connect.workers import WorkerProcess
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.conftest import PASSWORD, make_user

DATAGEN = "io.confluent.kafka.connect.datagen.DatagenConnector"


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    group = f"connect-browser-{uuid.uuid4().hex[:8]}"
    proc = WorkerProcess(tmp_path_factory.mktemp("connect-browser"), kafka_bootstrap, group)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def app_server(django_db_setup: None, django_db_blocker: Any, kafka_bootstrap: str,
               worker: WorkerProcess) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), override_settings(
            KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, MILLRACE_CONNECT_URL=worker.url), \
            serve("millrace.asgi:application") as server:
        yield server


@pytest.fixture
def tab(chromium: Any, app_server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:
    browser = Browser(chromium, app_server, request.node.name)
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


def test_a_connector_created_from_its_form_and_paused_changes_state_live(
        tab: Browser, chromium: Any, app_server: LiveServer) -> None:
    make_user("connect-admin", superuser=True)
    tab.login("connect-admin", PASSWORD, then="/connect/")
    page = tab.page
    name = f"pageviews-{uuid.uuid4().hex[:6]}"

    tab.visit("/connect/+new/")
    with page.expect_navigation():
        page.locator("#connector-plugins tr", has_text=DATAGEN).get_by_role("link").click()
    page.fill("#config-name", name)
    page.fill("#config-quickstart", "pageviews")
    page.fill("#config-max\\.interval", "50")
    with page.expect_navigation():  # no kafka.topic: the worker refuses, under the field
        page.click("#connector-form button[type=submit]")
    expect(page.locator('[data-field="kafka.topic"] .errorlist')).to_be_visible()
    tab.snap("refused")
    page.fill("#config-kafka\\.topic", f"topic-{name}")
    with page.expect_navigation():
        page.click("#connector-form button[type=submit]")
    assert page.url.endswith(f"/connect/{name}/")
    expect(page.locator('#connector-status tr[data-task="0"] [data-state]')).to_have_text(
        "RUNNING", timeout=30_000)
    tab.snap("running")

    watcher = Browser(chromium, app_server, "connect-list-watcher")
    try:
        watcher.login("connect-admin", PASSWORD, then="/connect/")
        row = watcher.page.locator(f'tr[data-connector="{name}"]')
        expect(row.locator(".connector-state [data-state]")).to_have_text("RUNNING")
        watcher.page.evaluate("window.__notReloaded = true")

        with page.expect_navigation():
            page.get_by_role("button", name="Pause").click()
        expect(row.locator(".connector-state [data-state]")).to_have_text("PAUSED",
                                                                          timeout=30_000)
        assert watcher.page.evaluate("window.__notReloaded") is True  # swapped in, live
        watcher.snap("paused-live")
        expect(page.locator('#connector-status tr[data-task="0"] [data-state]')).to_have_text(
            "PAUSED", timeout=30_000)
        tab.snap("paused")
        assert not watcher.errors, watcher.errors
    finally:
        watcher.close()
    assert list(AuditEntry.objects.filter(target=f"connector {name}").order_by("id")
                .values_list("action", flat=True)) == ["connector.create", "connector.pause"]
