"""The consumer-group and schema pages in real Chromium against a real Daphne server, a real
collector and the built-in broker: a group's lag appears, grows while its consumer is paused
(non-OK Burrow status, lag in seconds) and drains when it resumes, all without a reload; its
offsets are reset with a dry run first; schemas are browsed with a diff and a new version is
tested and registered; anonymous users are refused."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import confluent_kafka
import pytest
from django.db import connection
from django.test import override_settings
from playwright.sync_api import expect

from clusterclient import ClusterClient, TopicPartition
from controlcenter.access import Capability
from controlcenter.collector.loop import Collector, CollectorConfig
from controlcenter.models import AuditEntry, GroupState
from registry.actions import SchemaRequest, register_schema
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.collector.test_collector import create_topic
from tests.controlcenter.conftest import PASSWORD, make_user

RATE = 20  # messages per second, steady
LIVE_TIMEOUT_MS = 90_000  # the collector's cycles on a machine shared with other test runs


def asgi_application() -> Any:
    from millrace.asgi import application

    return application


@pytest.fixture(scope="module")
def cluster_server(django_db_setup: None, django_db_blocker: Any,
                   kafka_bootstrap: str) -> Iterator[LiveServer]:
    """The real project (its own URLconf and ASGI app) watching the session broker."""
    with django_db_blocker.unblock(), override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), \
            serve(asgi_application) as server:
        yield server


@pytest.fixture
def tab(chromium: Any, cluster_server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:
    browser = Browser(chromium, cluster_server, request.node.name)
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


@pytest.fixture
def collector(kafka_bootstrap: str, transactional_db: None) -> Iterator[None]:
    """One collector cycling every second in this process, as `manage.py collect` would."""
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):
        loop = Collector(CollectorConfig(bootstrap_servers=kafka_bootstrap, interval=1.0,
                                         history_topics=False))
    stop = threading.Event()

    def run() -> None:
        with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):
            try:
                loop.run(stop)
            finally:
                connection.close()

    thread = threading.Thread(target=run, name="collector", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=30)
    loop.close()


class Workload:
    """A producer at a steady rate and a confluent-kafka consumer that can be paused."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.paused = threading.Event()
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def __enter__(self) -> Workload:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def _produce(self) -> None:
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap})
        sent = 0
        started = time.monotonic()
        while not self.stopped.is_set():
            producer.produce(self.topic, f"m{sent}".encode(), partition=sent % 2)
            sent += 1
            producer.poll(0)
            time.sleep(max(0.0, started + sent / RATE - time.monotonic()))
        producer.flush(10)

    def _consume(self) -> None:
        consumer = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "auto.offset.reset": "earliest", "enable.auto.commit": True,
            "auto.commit.interval.ms": 500, "client.id": "lag-demo"})
        consumer.subscribe([self.topic])
        paused = False
        try:
            while not self.stopped.is_set():
                if self.paused.is_set() != paused and consumer.assignment():
                    paused = self.paused.is_set()
                    (consumer.pause if paused else consumer.resume)(consumer.assignment())
                consumer.poll(0.2)
        finally:
            consumer.close()  # leaves the group: it becomes Empty


def number(page: Any, selector: str) -> float:
    text = page.locator(selector).inner_text().split(" ")[0]
    return float(text) if re.fullmatch(r"[\d.]+", text) else -1.0


def wait_for(page: Any, predicate: Any, what: str) -> None:
    deadline = time.monotonic() + LIVE_TIMEOUT_MS / 1000
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        page.wait_for_timeout(500)


def test_a_lagging_group_shows_live_and_its_offsets_are_reset(
        tab: Browser, collector: None, kafka_bootstrap: str) -> None:
    topic, group = f"lag-{uuid.uuid4().hex[:6]}", f"lag-demo-{uuid.uuid4().hex[:6]}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    make_user("ops", Capability.CHANGE_GROUPS)
    page = tab.page
    with Workload(kafka_bootstrap, topic, group) as workload:
        wait_for(page, lambda: GroupState.objects.filter(group_id=group).exists(),
                 "the collector sees the group")
        tab.visit(f"/groups/?q={group}")
        page.click(f'tr[data-group="{group}"] a')
        page.wait_for_load_state("load")
        page.evaluate("window.__notReloaded = true")
        expect(page.locator("#group-partitions tr[data-partition]")).to_have_count(2)
        tab.snap("group-consuming")

        workload.paused.set()
        wait_for(page, lambda: number(page, '#group-summary [data-field="total-lag"]') > 3 * RATE,
                 "the lag grows while the consumer is paused")
        expect(page.locator('#group-summary [data-field="status"] .badge')).not_to_have_text(
            re.compile("^(OK|NO COMMITS|—)$"), timeout=LIVE_TIMEOUT_MS)
        wait_for(page, lambda: number(page, '#group-summary [data-field="max-lag-seconds"]') > 1,
                 "the lag in seconds shows")
        grown = number(page, '#group-summary [data-field="total-lag"]')
        tab.snap("group-paused-lagging")
        expect(page.locator("#lag-chart .u-over")).to_be_visible()  # uPlot drew the history

        workload.paused.clear()
        wait_for(page, lambda: 0 <= number(page, '#group-summary [data-field="total-lag"]')
                 < min(grown / 2, 2 * RATE), "the lag drains once the consumer resumes")
        tab.snap("group-resumed-drained")
        assert page.evaluate("window.__notReloaded") is True  # all of it live, no reload

    # The consumer has left: the group is Empty and its offsets may be reset.
    tab.login("ops", PASSWORD, then=quote(f"/groups/+reset/{group}/", safe="/"))
    page.select_option("select[name=mode]", "to-earliest")
    page.fill("input[name=topic]", topic)
    with page.expect_navigation():
        page.click("button[name=execute][value='0']")
    tab.snap("reset-dry-run")
    expect(page.locator("#reset-plan tr[data-partition]")).to_have_count(2)
    expect(page.locator('#reset-plan [data-field="target"]').first).to_have_text("0")
    with page.expect_navigation():
        page.click("#reset-execute button")
    tab.snap("reset-executed")
    expect(page.locator(".message-success")).to_contain_text("reset (to-earliest)")
    offsets = ClusterClient(kafka_bootstrap, timeout=10).committed_offsets(group)
    assert offsets == {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0}
    assert AuditEntry.objects.filter(action="group.reset_offsets", result="ok").count() == 1


def test_an_anonymous_user_cannot_reset_or_delete_a_group(tab: Browser, collector: None,
                                                          kafka_bootstrap: str) -> None:
    topic, group = f"anon-{uuid.uuid4().hex[:6]}", f"anon-{uuid.uuid4().hex[:6]}"
    create_topic(kafka_bootstrap, topic, partitions=1)
    ClusterClient(kafka_bootstrap, timeout=10).alter_group_offsets(
        group, {TopicPartition(topic, 0): 0})
    page = tab.page
    tab.visit(f"/groups/+reset/{group}/")
    with page.expect_navigation():
        page.click("button[name=execute][value='0']")
    tab.snap("reset-refused")
    assert "/login/" in page.url
    wait_for(page, lambda: GroupState.objects.filter(group_id=group).exists(),
             "the collector sees the group")
    tab.visit(f"/groups/{group}/")
    page.fill("input[name=confirm]", group)
    with page.expect_navigation():
        page.click("text=Delete group")
    tab.snap("delete-refused")
    assert "/login/" in page.url and not AuditEntry.objects.exists()


def user_schema(*extra: Mapping[str, object]) -> str:
    return json.dumps({"type": "record", "name": "User", "fields": [
        {"name": "id", "type": "long"}, *extra]})


def test_schemas_are_browsed_with_a_diff_and_a_version_is_registered(tab: Browser) -> None:
    register_schema("users-value", SchemaRequest(user_schema()), normalize=False)
    register_schema("users-value", SchemaRequest(user_schema(
        {"name": "email", "type": ["null", "string"], "default": None})), normalize=False)
    make_user("editor", Capability.CHANGE_SCHEMAS)
    page = tab.page
    tab.visit("/schemas/")
    with page.expect_navigation():
        page.click("text=users-value")
    tab.snap("subject")
    expect(page.locator("#schema-diff td.add").first).to_be_visible()
    expect(page.locator("#schema-diff")).to_contain_text("email")

    # Anonymous: the test runs (it changes nothing), registering is refused.
    incompatible = user_schema({"name": "age", "type": "int"})
    page.fill("textarea[name=schema]", incompatible)
    with page.expect_navigation():
        page.click("button[value=test]")
    expect(page.locator("#compat-result")).to_contain_text("Incompatible")
    with page.expect_navigation():
        page.click("button[value=register]")
    assert "/login/" in page.url

    tab.login("editor", PASSWORD, then="/schemas/users-value/")
    page.fill("textarea[name=schema]", incompatible)
    with page.expect_navigation():
        page.click("button[value=register]")
    tab.snap("register-refused")
    expect(page.locator(".field.has-error")).to_contain_text("error_code 409")
    page.fill("textarea[name=schema]", user_schema({"name": "age", "type": "int", "default": 0}))
    with page.expect_navigation():
        page.click("button[value=test]")
    expect(page.locator("#compat-result")).to_contain_text("compatible")
    with page.expect_navigation():
        page.click("button[value=register]")
    tab.snap("registered")
    expect(page.locator(".message-success")).to_contain_text("version 3")
    expect(page.locator("#versions tr[data-version]")).to_have_count(3)
