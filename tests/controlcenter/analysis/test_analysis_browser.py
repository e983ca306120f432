"""The Analytics pages in real Chromium against a real Daphne server and a real Celery worker:
a job launched from the UI shows its progress bar live, then its results and a chart; a long
job is cancelled from the UI and ends CANCELLED with nothing stored."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from playwright.sync_api import expect

from controlcenter.access import Capability
from controlcenter.models import (
    AnalysisRun,
    AnalysisSchedule,
    AnalysisStatus,
    AuditEntry,
    GroupState,
    TopicState,
)
from tests.controlcenter.analysis.analysis_worker import (
    Scenario,
    build_scenario,
    celery_worker,
    purge_queue,
    wait_for,
)
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.conftest import PASSWORD, make_user
from tests.sparkcluster import spark_standalone

pytestmark = pytest.mark.slow
SPARK_TIMEOUT_MS = 300_000  # a JVM start and a job on a machine shared with other test runs

# Every status the page shows, as the pushes arrive: what "the progress bar moves" means.
RECORD_SWAPS = """
document.addEventListener("live:swapped", (event) => {
  const el = document.getElementById(event.detail.id);
  if (!el || !el.dataset.status) return;
  const bar = el.querySelector("[role=progressbar]");
  const seen = JSON.parse(sessionStorage.getItem("statuses") || "[]");  // kept over reloads
  seen.push({status: el.dataset.status,
             tasks: bar ? Number(bar.getAttribute("aria-valuemax")) : null,
             done: bar ? Number(bar.getAttribute("aria-valuenow")) : null});
  sessionStorage.setItem("statuses", JSON.stringify(seen));
});
"""

def asgi_application() -> Any:
    from millrace.asgi import application

    return application


BACKUP = "backup"


@pytest.fixture(scope="module")
def scenario(kafka_bootstrap: str) -> Scenario:
    return build_scenario(kafka_bootstrap)


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any,
           kafka_bootstrap: str) -> Iterator[LiveServer]:  # fmt: skip
    # a second cluster (the same broker under another name): the runs list is one cluster's
    extra = [{"name": BACKUP, "bootstrap_servers": kafka_bootstrap}]  # JSON for the server
    with django_db_blocker.unblock(), override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), \
            serve(asgi_application, KAFKA_EXTRA_CLUSTERS=extra) as live:
        yield live


@pytest.fixture
def tab(chromium: Any, server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:  # fmt: skip
    make_user("analyst", Capability.RUN_ANALYSES)
    purge_queue(settings.MILLRACE_ANALYSIS_QUEUE)
    browser = Browser(chromium, server, request.node.name)
    browser.page.add_init_script(RECORD_SWAPS)
    browser.login("analyst", PASSWORD, then="/analytics/")
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


def launch_from_the_form(tab: Browser, job: str, fields: dict[str, str]) -> int:
    tab.visit("/analytics/")
    with tab.page.expect_navigation():
        tab.page.click(f"a[href='/analytics/new/{job}/']")
    for name, value in fields.items():
        field = tab.page.locator(f"[name={name}]")
        if field.evaluate("(e) => e.tagName") == "SELECT":  # names the cluster has: a choice
            field.select_option(value)
        else:
            field.fill(value)
    tab.snap("form")
    with tab.page.expect_navigation():
        tab.page.click("#launch-form button[type=submit]")
    run_id = int(tab.page.url.rstrip("/").rsplit("/", 1)[1])
    expect(tab.page.locator(f"#analysis-status-{run_id}")).to_have_attribute(
        "data-status", re.compile("QUEUED|RUNNING"))  # RUNNING: a worker took it at once
    return run_id


def test_a_job_launched_from_the_ui_shows_live_progress_then_tables_and_a_chart(
    tab: Browser, scenario: Scenario, tmp_path: Path
) -> None:
    run_id = launch_from_the_form(tab, "hot_partitions", {"topics": scenario.topic})
    # Started after the page listens; on the queue the server (forked earlier) sends to.
    with celery_worker(tmp_path, scenario.bootstrap, queue=settings.MILLRACE_ANALYSIS_QUEUE):
        expect(tab.page.locator("#table-partitions")).to_be_visible(timeout=SPARK_TIMEOUT_MS)
    tab.snap("results")
    statuses = tab.page.evaluate("JSON.parse(sessionStorage.getItem('statuses') || '[]')")
    moving = [s for s in statuses if s["status"] == "RUNNING" and s["tasks"]]
    assert moving, f"no progress was pushed: {statuses}"
    assert statuses[-1]["status"] == "SUCCEEDED"
    rows = tab.page.locator("#table-partitions tbody tr")
    expect(rows).to_have_count(4)
    expect(tab.page.locator(".analysis-chart .uplot canvas")).to_have_count(1)
    expect(tab.page.locator(f"#analysis-status-{run_id}")).to_contain_text("SUCCEEDED")
    csv_link = tab.page.locator("a", has_text="CSV").first
    assert csv_link.get_attribute("href") == (
        f"/analytics/runs/{run_id}/download.csv?table=partitions")


def test_a_long_job_is_cancelled_from_the_ui_and_ends_cancelled(
    tab: Browser, scenario: Scenario, tmp_path: Path
) -> None:
    # A master with no worker: the job's first stage waits for executors until cancelled.
    # The master's JVM and the Celery worker start at once.
    with spark_standalone(tmp_path, workers=0, wait=False) as cluster, \
            celery_worker(tmp_path, scenario.bootstrap, master=cluster.url,
                          queue=settings.MILLRACE_ANALYSIS_QUEUE, wait=False) as worker_ready:
        cluster.wait_up()
        worker_ready()
        run_id = launch_from_the_form(tab, "eta", {"groups": scenario.group})
        status = tab.page.locator(f"#analysis-status-{run_id}")
        expect(status).to_have_attribute("data-status", "RUNNING", timeout=SPARK_TIMEOUT_MS)
        expect(status.locator("[role=progressbar]")).to_be_visible()
        tab.snap("running")
        with tab.page.expect_navigation():
            tab.page.click("#cancel-form button")
        expect(tab.page.locator(f"#analysis-status-{run_id}")).to_have_attribute(
            "data-status", "CANCELLED", timeout=SPARK_TIMEOUT_MS)
        tab.snap("cancelled")
        run = wait_for(run_id, AnalysisStatus.CANCELLED)
    assert run.result is None and run.finished_at is not None
    assert AuditEntry.objects.filter(action="analysis.cancel", target=f"run {run_id}",
                                     result="ok").exists()
    assert not AnalysisRun.objects.filter(status=AnalysisStatus.RUNNING).exists()


def test_runs_queued_from_another_browser_and_the_api_appear_in_an_open_runs_list(
    tab: Browser, chromium: Any, server: LiveServer, request: pytest.FixtureRequest
) -> None:
    """No worker: the runs stay QUEUED until the API cancels one, which the row shows."""
    AnalysisSchedule.objects.create(name="eta-hourly", job="eta", every_minutes=60)
    AnalysisSchedule.objects.create(name="sla-nightly", job="sla", enabled=False)
    tab.visit("/analytics/")
    expect(tab.page.locator("#analysis-schedules tbody tr")).to_have_count(2)
    expect(tab.page.locator("#analysis-runs-empty")).to_be_visible()
    tab.page.evaluate("window.notReloaded = true")
    expect(tab.page.locator("#live-indicator")).to_have_attribute("data-state", "live")
    make_user("colleague", Capability.RUN_ANALYSES)
    other = Browser(chromium, server, request.node.name + "-other")
    try:
        other.login("colleague", PASSWORD, then="/analytics/new/eta/")
        with other.page.expect_navigation():
            other.page.click("#launch-form button[type=submit]")
        from_browser = int(other.page.url.rstrip("/").rsplit("/", 1)[1])
    finally:
        other.close()
    rows = tab.page.locator("#analysis-runs tbody tr")
    expect(rows).to_have_count(1)
    expect(tab.page.locator(f"#analysis-row-{from_browser}")).to_contain_text("colleague")
    # A script on the API, over HTTP with Basic auth (its pushes leave the server).
    api = httpx.Client(base_url=server.url, auth=("analyst", PASSWORD), timeout=30)
    launched = api.post("/api/v1/analysis", json={"job": "lag_summary"})
    assert launched.status_code == 202, launched.text
    from_api = launched.json()["id"]
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_id(f"analysis-row-{from_api}")  # newest first
    expect(tab.page.locator("#analysis-runs-count")).to_have_text("2")
    tab.snap("two-new-runs")
    # Another cluster's run is pushed to every runs list; this one (the default cluster's)
    # leaves it out: the cancel pushed after it changes a row and the count stays.
    elsewhere = api.post("/api/v1/analysis", json={"job": "lag_summary", "cluster": BACKUP})
    assert elsewhere.status_code == 202 and elsewhere.json()["cluster"] == BACKUP
    assert api.post(f"/api/v1/analysis/{from_browser}/cancel").status_code == 202
    api.close()
    expect(tab.page.locator(f"#analysis-row-{from_browser} .badge")).to_have_text("CANCELLED")
    expect(rows).to_have_count(2)
    tab.snap("one-cancelled")
    assert tab.page.evaluate("window.notReloaded === true")
    purge_queue(settings.MILLRACE_ANALYSIS_QUEUE)


# Per category chart: [bar pixel alpha, gap pixel alpha] at each slot, and whether every
# label lies inside the canvas without touching its neighbour (upright labels: within the
# axis' height).
INSPECT_CHART = """(name) => {
  const u = document.querySelector(`.analysis-chart[data-chart="${name}"]`).plot;
  const ratio = devicePixelRatio, axis = u.axes[0];
  const y = Math.round(u.bbox.top + u.bbox.height - 4 * ratio);
  const alpha = (x) => u.ctx.getImageData(Math.round(x), y, 1, 1).data[3];
  const slots = u.data[0].map((i) => [alpha(u.valToPos(i, "x", true)),
                                      alpha(u.valToPos(i + 0.5, "x", true) - ratio)]);
  u.ctx.font = axis.font[0];
  const labels = axis._values.map((text, i) => ({ text, width: u.ctx.measureText(text).width,
                                                   x: u.valToPos(axis._splits[i], "x", true) }));
  const upright = axis._rotate !== 0;
  const fits = labels.every((l, i) => upright
    ? l.width <= axis._size * ratio
    : l.x - l.width / 2 >= 0 && l.x + l.width / 2 <= u.ctx.canvas.width &&
      (i === 0 || labels[i - 1].x + labels[i - 1].width / 2 < l.x - l.width / 2));
  return { slots, upright, fits, labels: labels.map((l) => l.text) };
}"""


def test_category_charts_draw_a_bar_per_label_and_cut_no_label(tab: Browser) -> None:
    partitions = [f"orders-eu-west-payments-{p}" for p in range(12)]
    result: dict[str, Any] = {"job": "hot_partitions", "tables": {}, "charts": {
        "messages_per_partition": {"x": partitions,
                                   "y": {"messages": [400.0 + 90 * (p % 5) for p in range(12)]}},
        "few": {"x": ["billing", "payments", "shipping"], "y": {"messages": [3.0, 8.0, 5.0]}}}}
    run = AnalysisRun.objects.create(job="hot_partitions", status=AnalysisStatus.SUCCEEDED,
                                     result=result)
    tab.visit(f"/analytics/runs/{run.pk}/")
    expect(tab.page.locator(".analysis-chart[data-kind=bars] canvas")).to_have_count(2)
    for name, upright in (("messages_per_partition", True), ("few", False)):
        chart = tab.page.evaluate(INSPECT_CHART, name)
        assert chart["labels"] == result["charts"][name]["x"]
        assert chart["upright"] is upright and chart["fits"], chart
        assert all(bar > 0 and gap == 0 for bar, gap in chart["slots"]), chart["slots"]


def test_the_launch_forms_offer_the_clusters_topics_and_groups(tab: Browser) -> None:
    for name, internal in (("orders", False), ("payments", False), ("__consumer_offsets", True)):
        TopicState.objects.create(name=name, internal=internal, partitions=3,
                                  replication_factor=1, updated_at=timezone.now())
    for group in ("billing", "audit"):
        GroupState.objects.create(group_id=group, state="STABLE", updated_at=timezone.now())
    tab.visit("/analytics/new/hot_partitions/")
    topics = tab.page.locator("select[name=topics] option")
    assert topics.all_text_contents() == ["orders", "payments"]  # no internal topic
    tab.page.locator("select[name=topics]").select_option(["orders", "payments"])
    tab.snap("topics offered")
    with tab.page.expect_navigation():
        tab.page.click("#launch-form button[type=submit]")
    run = AnalysisRun.objects.get(pk=int(tab.page.url.rstrip("/").rsplit("/", 1)[1]))
    assert run.parameters["topics"] == ["orders", "payments"]

    tab.visit("/analytics/new/eta/")
    groups = tab.page.locator("select[name=groups] option")
    assert groups.all_text_contents() == ["audit", "billing"]
