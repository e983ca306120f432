"""The cluster pages in real Chromium against `manage.py platform` (three brokers under the
supervisor, Daphne, the collector): the overview shows three brokers; killing a broker from
the Brokers page moves leadership and shrinks the ISR on an open topic page without a
reload, and starting it again brings the ISR back; a topic is created, a message produced
and found with a filter; an anonymous user is refused every state change.
Screenshots: var/screenshots/<test name>/."""

from __future__ import annotations

import base64
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import REPO
from tests.controlcenter.browser import Browser, LiveServer, launch
from tests.millrace.test_platform import platform_env, wait_for_endpoints

PASSWORD = "pages-admin-password"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def stopping_platforms() -> Iterator[list[threading.Thread]]:
    """Threads waiting for platforms told to stop; the session's end waits for them."""
    threads: list[threading.Thread] = []
    yield threads
    for thread in threads:
        thread.join()


def _reap(proc: subprocess.Popen[str]) -> None:
    try:
        proc.communicate(timeout=90)  # its last lines read, so its writes never block or fail
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def platform_server(tmp_path_factory: pytest.TempPathFactory,
                    stopping_platforms: list[threading.Thread]) -> Iterator[LiveServer]:
    env = platform_env()
    env.update(MILLRACE_ADMIN_PASSWORD=PASSWORD, MILLRACE_COLLECT_INTERVAL_S="2")
    data = tmp_path_factory.mktemp("platform")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "platform", "--any-port", "--data-dir", str(data)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        endpoints = wait_for_endpoints(proc, timeout=180)
        yield LiveServer(endpoints["Control center"].rstrip("/"))
    finally:
        # Its clean stop (three brokers' controlled shutdowns, Celery's exit: 15-40 s)
        # proves nothing here, so the worker's next file runs meanwhile.
        proc.send_signal(signal.SIGINT)
        reaper = threading.Thread(target=_reap, args=(proc,), name="platform-stop")
        reaper.start()
        stopping_platforms.append(reaper)


@pytest.fixture(scope="module")
def chromium(platform_server: LiveServer) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = launch(playwright)
        yield instance
        instance.close()


@pytest.fixture
def tab(chromium: Any, platform_server: LiveServer,
        request: pytest.FixtureRequest) -> Iterator[Browser]:
    browser = Browser(chromium, platform_server, request.node.name)
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


def sign_in(tab: Browser) -> None:
    tab.login("admin", PASSWORD, then="/")


def create_topic(tab: Browser, name: str, partitions: int, replication: int) -> None:
    tab.visit("/topics/+create/")
    tab.page.fill("input[name=name]", name)
    tab.page.fill("input[name=partitions]", str(partitions))
    tab.page.fill("input[name=replication_factor]", str(replication))
    with tab.page.expect_navigation():
        tab.page.click("#topic-create-form button[type=submit]")
    assert "created" in tab.page.inner_text(".messages")
    # The topic page exists once the collector has sampled the new topic (every second).
    tab.page.goto(f"/topics/{name}/")
    tab.page.wait_for_function(
        f"() => document.querySelectorAll('#topic-map tr[data-partition]').length === "
        f"{partitions} || (location.reload(), false)", polling=1000, timeout=60_000)
    tab.page.wait_for_load_state("load")


def test_the_overview_shows_three_brokers(tab: Browser) -> None:
    tab.page.goto("/")
    tab.page.wait_for_function(
        "() => document.querySelectorAll('#broker-table tr[data-status=up]').length === 3 "
        "|| (location.reload(), false)", polling=1000, timeout=60_000)
    tab.snap("overview")
    assert tab.page.locator("#live-indicator").get_attribute("data-state") == "live"
    for path in ("/brokers/", "/brokers/1/", "/topics/"):
        assert tab.visit(path).status == 200


def test_an_anonymous_user_is_refused_every_state_change(tab: Browser) -> None:
    tab.visit("/brokers/")
    tab.page.wait_for_selector("button[data-command=kill][data-broker='1']")
    with tab.page.expect_navigation():
        tab.page.click("button[data-command=kill][data-broker='1']")
    assert "/login/" in tab.page.url
    tab.snap("kill refused")
    tab.visit("/topics/+create/")
    tab.page.fill("input[name=name]", "anonymous-topic")
    with tab.page.expect_navigation():
        tab.page.click("#topic-create-form button[type=submit]")
    assert "/login/" in tab.page.url
    for path, form in (("/topics/_millrace-cluster-events/messages/", "#produce-form"),
                       ("/topics/_millrace-cluster-events/", ".danger-zone form"),
                       ("/topics/_millrace-cluster-events/", "form.config-edit")):
        tab.visit(path)
        refused = tab.page.evaluate(
            """async (selector) => {
                 const form = document.querySelector(selector);
                 const answer = await fetch(form.action, {method: "POST", body: new FormData(form),
                                                          redirect: "manual"});
                 return answer.type === "opaqueredirect" || answer.status === 403;
               }""", form)
        assert refused, (path, form)
    tab.visit("/brokers/")
    assert tab.page.locator("#broker-table tr[data-status=up]").count() == 3


def leadership(page: Any, broker: int) -> dict[str, int]:
    """Cells of `broker`'s column in the open page's leadership map."""
    return dict(page.evaluate(
        """(column) => {
             const cells = [...document.querySelectorAll(
               `#topic-map tbody tr td:nth-child(${column + 1})`)];
             return {leader: cells.filter(c => c.classList.contains("map-leader")).length,
                     follower: cells.filter(c => c.classList.contains("map-follower")).length,
                     out: cells.filter(c => c.classList.contains("map-out")).length};
           }""", broker))


def test_killing_a_broker_moves_leadership_and_isr_live_and_starting_it_brings_them_back(
        tab: Browser, chromium: Any, platform_server: LiveServer) -> None:
    sign_in(tab)
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    create_topic(tab, topic, partitions=6, replication=3)
    watch = tab.page
    watch.evaluate("window.__notReloaded = true")
    assert leadership(watch, 2)["leader"] == 2 and leadership(watch, 2)["out"] == 0
    tab.snap("before kill")

    # One page kills broker 2 from its own page; the Brokers page, open and never reloaded,
    # swaps broker 2's commands to Start as the process state changes.
    operator = tab.context.new_page()
    operator.goto("/brokers/")
    operator.evaluate("window.__notReloaded = true")
    killer = tab.context.new_page()
    killer.goto("/brokers/2/")
    with killer.expect_navigation():
        killer.click("#broker-process button[data-command=kill]")
    assert "now killed" in killer.inner_text(".messages")
    killer.close()
    operator.wait_for_selector(
        "#broker-controls tr[data-broker='2'] button[data-command=start]", timeout=60_000)
    assert operator.locator(
        "#broker-controls tr[data-broker='2'] button[data-command=kill]").count() == 0
    assert operator.evaluate("window.__notReloaded") is True
    operator.screenshot(path=str(tab.shots / "brokers-after-kill.png"), full_page=True)

    # The open topic page changes by itself: broker 2 leads nothing and is out of every ISR.
    watch.wait_for_function(
        """() => {
             const cells = [...document.querySelectorAll("#topic-map tbody tr td:nth-child(3)")];
             return cells.length === 6 && cells.every(c => c.classList.contains("map-out"));
           }""", timeout=90_000)
    tab.snap("after kill")
    isr = watch.locator("#topic-partitions td[data-isr]").all_inner_texts()
    assert all("2" not in cell.split(", ") for cell in isr), isr
    assert watch.locator("#topic-partitions .badge-warn").count() == 6
    assert watch.evaluate("window.__notReloaded") is True

    # The pushed Start button works as rendered ones do (it takes the page's CSRF token), and
    # a second Brokers page, opened while broker 2 was down, stops offering Start by itself.
    viewer = tab.context.new_page()
    viewer.goto("/brokers/")
    assert viewer.locator("#broker-controls tr[data-broker='2'] [data-command=start]").count()
    with operator.expect_navigation(timeout=90_000):
        operator.click("#broker-controls button[data-command=start][data-broker='2']")
    assert "now running" in operator.inner_text(".messages")
    viewer.wait_for_selector(
        "#broker-controls tr[data-broker='2'] button[data-command=kill]", timeout=60_000)
    assert viewer.locator("#broker-controls tr[data-broker='2'] [data-command=start]").count() == 0
    viewer.close()

    watch.wait_for_function(
        """() => {
             const cells = [...document.querySelectorAll("#topic-map tbody tr td:nth-child(3)")];
             return cells.length === 6 && !cells.some(c => c.classList.contains("map-out"));
           }""", timeout=90_000)
    tab.snap("after start")
    isr = watch.locator("#topic-partitions td[data-isr]").all_inner_texts()
    assert all("2" in cell.split(", ") for cell in isr), isr

    # Back in the ISR, broker 2 follows; a preferred-leader election gives it its two
    # partitions back (unless the cluster already did so on its own).
    operator.goto("/brokers/")
    with operator.expect_navigation():
        operator.click("#elect-leaders")
    assert "Preferred leaders elected" in operator.inner_text(".messages")
    watch.wait_for_function(
        """() => document.querySelectorAll(
             "#topic-map tbody tr td:nth-child(3).map-leader").length === 2""",
        timeout=60_000)
    tab.snap("after election")
    assert watch.evaluate("window.__notReloaded") is True
    operator.close()


def test_creating_a_topic_below_min_insync_replicas_warns_that_acks_all_writes_fail(
        tab: Browser) -> None:
    sign_in(tab)
    topic = f"short-{uuid.uuid4().hex[:6]}"
    tab.visit("/topics/+create/")
    tab.page.fill("input[name=name]", topic)
    tab.page.fill("input[name=replication_factor]", "1")  # the platform: min.insync.replicas=2
    with tab.page.expect_navigation():
        tab.page.click("#topic-create-form button[type=submit]")
    warning = tab.page.locator(".message-warning")
    assert "replication factor 1, below its min.insync.replicas (2)" in warning.inner_text()
    assert "acks=all" in warning.inner_text()
    tab.snap("warned")


def test_a_topic_is_created_a_message_produced_and_found_with_a_filter(
        tab: Browser, chromium: Any, platform_server: LiveServer) -> None:
    sign_in(tab)
    topic = f"browse-{uuid.uuid4().hex[:6]}"
    create_topic(tab, topic, partitions=2, replication=3)
    tab.visit(f"/topics/{topic}/messages/")
    for i, item in enumerate(["green tea", "coffee", "black tea"]):
        tab.page.click("#produce summary") if i == 0 else None
        tab.page.fill("#id_produce-key", f"user-{i}")
        tab.page.fill("#id_produce-value", f'{{"item": "{item}", "n": {i}}}')
        tab.page.fill("#id_produce-headers", "source=browser")
        with tab.page.expect_navigation():
            tab.page.click("#produce-form button[type=submit]")
        assert "Produced to" in tab.page.inner_text(".messages")
        tab.page.click("#produce summary")
    tab.page.fill("#id_value", "tea")
    tab.page.select_option("#id_start", "oldest")
    with tab.page.expect_navigation():
        tab.page.click("#browse-form button[type=submit]")
    tab.snap("filtered")
    rows = tab.page.locator("#message-rows tr.message-row")
    assert rows.count() == 2
    assert "coffee" not in tab.page.inner_text("#message-rows")
    assert '"item": "green tea"' in tab.page.inner_text("#message-rows")
    with tab.page.expect_download() as download:
        tab.page.click("#download-csv")
    assert Path(download.value.path()).read_text().count("tea") >= 2

    # The live tail: a message produced elsewhere (the JSON API, as a script would) appears
    # on top of the open page, through the same filter; one that does not match does not.
    tab.page.check("#live-tail")
    script = chromium.new_context(base_url=platform_server.url)
    auth = {"Authorization": "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()}
    for item in ("oolong tea", "espresso"):
        answer = script.request.post(f"/api/v1/topics/{topic}/messages", headers=auth,
                                     data={"key": "tail", "value": f'{{"item": "{item}"}}'})
        assert answer.status == 201, answer.text()
    script.close()
    tab.page.wait_for_selector("#message-rows tr.tailed", timeout=30_000)
    tab.snap("tailed")
    assert "oolong tea" in tab.page.inner_text("#message-rows tr.message-row >> nth=0")
    assert "espresso" not in tab.page.inner_text("#message-rows")


def test_the_topic_list_shows_a_created_topic_and_a_killed_broker_without_a_reload(
        tab: Browser, chromium: Any, platform_server: LiveServer) -> None:
    tab.visit("/topics/")
    listing = tab.page
    listing.evaluate("window.__notReloaded = true")
    script = chromium.new_context(base_url=platform_server.url)
    auth = {"Authorization": "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()}
    topic = f"listed-{uuid.uuid4().hex[:6]}"
    answer = script.request.post("/api/v1/topics", headers=auth, data={
        "name": topic, "partitions": 3, "replication_factor": 3})
    assert answer.status == 201, answer.text()

    # The collector's next sample pushes the new row into the open list.
    row = listing.locator(f"#topic-table tr[data-key='{topic}']")
    row.wait_for(timeout=60_000)
    under_replicated = row.locator("[data-column=under-replicated]")
    assert under_replicated.inner_text() == "0"
    tab.snap("created")

    assert script.request.post("/api/v1/brokers/3/kill", headers=auth).ok
    try:
        listing.wait_for_function(
            f"""() => document.querySelector(
                  "#topic-table tr[data-key='{topic}'] [data-column=under-replicated]"
                )?.textContent === "3" """, timeout=90_000)
        tab.snap("broker 3 killed")
        assert "warn" in (row.get_attribute("class") or "")
    finally:
        assert script.request.post("/api/v1/brokers/3/start", headers=auth,
                                   timeout=90_000).ok
    listing.wait_for_function(
        f"""() => document.querySelector(
              "#topic-table tr[data-key='{topic}'] [data-column=under-replicated]"
            )?.textContent === "0" """, timeout=90_000)

    # Deleted through the API, the row leaves the open list.
    assert script.request.delete(f"/api/v1/topics/{topic}", headers=auth).status == 204
    row.wait_for(state="detached", timeout=60_000)
    tab.snap("deleted")
    assert listing.evaluate("window.__notReloaded") is True
    script.close()
