"""An analysis run's status card in real Chromium tells what ran and how: the job, its
parameters by their form labels, when it was queued, started and finished, how long it took,
the Spark master and Celery worker, and while it runs its stages and tasks; screenshots
under var/screenshots/ for a look."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlcenter.models import AnalysisRun, AnalysisStatus
from tests.controlcenter.browser import Browser
from tests.controlcenter.pages.test_group_browser import cluster_server, tab

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["cluster_server", "tab"]  # the browser fixtures of the group pages' tests

QUEUED = dt.datetime(2026, 3, 2, 9, 59, 58, tzinfo=dt.UTC)
STARTED = QUEUED + dt.timedelta(seconds=2)
FINISHED = STARTED + dt.timedelta(seconds=83.4)
SINCE, UNTIL = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC), dt.datetime(2026, 3, 2, 10, 0,
                                                                         tzinfo=dt.UTC)
PARAMETERS = {"since": SINCE.timestamp(), "until": UNTIL.timestamp(),
              "groups": ["billing", "audit"], "threshold_s": 300.0, "objective": 0.99}


def run(status: str, **fields: object) -> AnalysisRun:
    created = AnalysisRun.objects.create(job="sla", parameters=PARAMETERS, status=status,
                                         master="local[2]", worker="celery@worker-1", **fields)
    AnalysisRun.objects.filter(pk=created.pk).update(created_at=QUEUED)  # auto_now_add
    return created


def facts(tab: Browser) -> dict[str, str]:
    """The card's label/value pairs as the page shows them."""
    found: dict[str, str] = tab.page.evaluate("""() => Object.fromEntries(
        [...document.querySelectorAll('#run-state dt')].map(
            (dt) => [dt.textContent.trim(), dt.nextElementSibling.textContent.trim()]))""")
    return found


def test_a_finished_run_shows_its_job_parameters_times_and_spark(tab: Browser) -> None:
    done = run(AnalysisStatus.SUCCEEDED, started_at=STARTED, finished_at=FINISHED,
               stages_done=3, stages_total=3, stages_skipped=2, tasks_done=12, tasks_total=12,
               result={"job": "sla", "charts": {}, "tables": {}})
    tab.visit(f"/analytics/runs/{done.pk}/")
    expect(tab.page.locator("#run-state .badge")).to_have_text("SUCCEEDED")
    shown = facts(tab)
    assert shown["Job"] == "SLA breaches (sla)"
    assert shown["Window"] == "2026-03-02 09:00:00 \N{EN DASH} 10:00:00 UTC (60 min)"
    assert shown["Consumer groups"] == "billing, audit"
    assert shown["SLA threshold (seconds)"] == "300.0"
    assert shown["Objective"] == "0.99"
    assert shown["Queued"] == "2026-03-02 09:59:58 UTC"
    assert shown["Started"] == "2026-03-02 10:00:00 UTC"
    assert shown["Finished"] == "2026-03-02 10:01:23 UTC"
    assert shown["Duration"] == "1 min 23.4 s"
    assert shown["Spark master"] == "local[2]"
    assert shown["Celery worker"] == "celery@worker-1"
    assert shown["Spark stages"] == "3 of 3 (2 skipped: output reused) · 12 of 12 tasks"
    tab.snap("succeeded-card")


def test_a_running_run_shows_its_progress_and_a_queued_one_what_it_waits_for(
        tab: Browser) -> None:
    running = run(AnalysisStatus.RUNNING, started_at=timezone.now(), stages_done=1,
                  stages_total=3, tasks_done=5, tasks_total=20)
    tab.visit(f"/analytics/runs/{running.pk}/")
    expect(tab.page.locator("#run-state [role=progressbar]")).to_have_attribute(
        "aria-valuenow", "5")
    shown = facts(tab)
    assert shown["Spark stages"] == "1 of 3 · 5 of 20 tasks"
    assert shown["Finished"] == "—"
    assert shown["Duration"].endswith(" s")  # so far
    tab.snap("running-card")

    queued = AnalysisRun.objects.create(job="sla", parameters=PARAMETERS)
    tab.visit(f"/analytics/runs/{queued.pk}/")
    shown = facts(tab)
    assert shown["Started"] == "— (waiting for a Celery worker)"
    assert shown["Spark master"] == "—"
    tab.snap("queued-card")


SUMMARY_COLUMNS = [
    "group", "topic", "partition", "samples", "lag_min", "lag_avg", "lag_p95", "lag_max",
    "lag_seconds_min", "lag_seconds_avg", "lag_seconds_p95", "lag_seconds_max", "seconds_OK",
    "seconds_WARN", "seconds_ERR", "seconds_STOP", "seconds_STALL", "seconds_REWIND",
]  # fmt: skip
SUMMARY_ROW = [
    "billing-consumers-with-a-long-name", "payments.settlements.v2", 7, 3600, 0, 1234.5678901234567,
    98765.43210987654, 123456, 0.0, 12.345678901234567, 251.99999999999997, 3725.5, 3540.0,
    60.0, 0.0, 0.0, 0.0, 0.0,
]  # fmt: skip


def test_a_result_table_reads_in_units_and_scrolls_inside_its_card(tab: Browser) -> None:
    row = dict(zip(SUMMARY_COLUMNS, SUMMARY_ROW, strict=True))
    result = {"job": "lag_summary", "charts": {},
              "tables": {"partitions": {"columns": SUMMARY_COLUMNS, "rows": [row]}}}
    done = run(AnalysisStatus.SUCCEEDED, started_at=STARTED, finished_at=FINISHED,
               stages_done=3, stages_total=3, tasks_done=12, tasks_total=12, result=result)
    tab.page.set_viewport_size({"width": 1100, "height": 800})
    tab.visit(f"/analytics/runs/{done.pk}/")
    table = tab.page.locator("#table-partitions")
    headers = table.locator("thead th").all_text_contents()
    assert headers[:4] == ["Group", "Topic", "Partition", "Samples"]
    assert headers[5] == "Lag avg" and headers[10] == "Time lag p95"
    assert headers[12:14] == ["Time OK", "Time warning"]
    cells = dict(zip(SUMMARY_COLUMNS, table.locator("tbody td").all_text_contents(),
                     strict=True))
    assert cells["lag_avg"] == "1,235"
    assert cells["lag_p95"] == "98,765"
    assert cells["lag_max"] == "123,456"
    assert cells["lag_seconds_avg"] == "12.3 s"
    assert cells["lag_seconds_p95"] == "4 min 12 s"
    assert cells["lag_seconds_max"] == "1 h 2 min"
    assert cells["seconds_OK"] == "59 min"
    assert cells["seconds_WARN"] == "1 min"
    # names link to their pages
    links = table.locator("tbody td a")
    assert links.nth(0).get_attribute("href") == "/groups/billing-consumers-with-a-long-name/"
    assert links.nth(1).get_attribute("href") == "/topics/payments.settlements.v2/"
    # the exact value stays a hover away
    assert table.locator("tbody td").nth(10).get_attribute("title") == "251.99999999999997"
    # A wide table scrolls inside its card; the page itself never scrolls sideways.
    widths = tab.page.evaluate("""() => {
        const scroller = document.querySelector('#table-partitions').closest('.table-scroll');
        return {table: scroller.scrollWidth, box: scroller.clientWidth,
                page: document.documentElement.scrollWidth, view: window.innerWidth,
                overflow: getComputedStyle(scroller).overflowX};
    }""")
    assert widths["table"] > widths["box"], widths
    assert widths["overflow"] == "auto"
    assert widths["page"] <= widths["view"], widths
    aligned = table.locator("tbody td").nth(3).evaluate("(td) => getComputedStyle(td).textAlign")
    assert aligned == "right"  # numbers line up by their last digit
    tab.snap("result-table")
