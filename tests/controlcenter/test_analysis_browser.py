"""The Analytics pages in real Chromium against a real Daphne server and a real Celery worker:
a job launched from the UI shows its progress bar live, then its results and a chart; a long
job is cancelled from the UI and ends CANCELLED with nothing stored."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from playwright.sync_api import expect

from controlcenter.access import Capability
from controlcenter.models import AnalysisRun, AnalysisStatus, AuditEntry
from tests.controlcenter.analysis_worker import (
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
    from controlcenter.asgi import application

    return application


@pytest.fixture(scope="module")
def scenario(kafka_bootstrap: str) -> Scenario:
    return build_scenario(kafka_bootstrap)


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any,
           kafka_bootstrap: str) -> Iterator[LiveServer]:  # fmt: skip
    with django_db_blocker.unblock(), override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), \
            serve(asgi_application) as live:
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
        tab.page.fill(f"[name={name}]", value)
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
    with spark_standalone(tmp_path, workers=0) as cluster, \
            celery_worker(tmp_path, scenario.bootstrap, master=cluster.url,
                          queue=settings.MILLRACE_ANALYSIS_QUEUE):
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
