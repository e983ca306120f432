"""The proof of issue 11's launching: jobs queued through the API run in a real Celery worker
(a subprocess, on the filesystem transport and on Redis), each as a local Spark job, and their
ETA, skew index, breach minutes and hot partitions match what this test computes on its own
from the lag scenario it wrote to the built-in cluster."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from controlcenter import actions
from controlcenter.access import Capability
from controlcenter.models import AnalysisRun, AnalysisStatus, AuditEntry
from tests.controlcenter.analysis_worker import (
    PARTITIONS,
    PRODUCE_RATE,
    Scenario,
    build_scenario,
    celery_worker,
    wait_for,
)
from tests.controlcenter.conftest import PASSWORD, make_user
from tests.sparkcluster import SparkCluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
SLA_THRESHOLD_S, OBJECTIVE, HOT_FACTOR = 400.0, 0.9, 1.5


@pytest.fixture(scope="module")
def scenario(kafka_bootstrap: str) -> Scenario:
    return build_scenario(kafka_bootstrap)


@pytest.fixture(scope="module")
def worker(django_db_setup: None, scenario: Scenario,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:  # fmt: skip
    """One worker with beat on the filesystem transport for the tests that need no other;
    started once the test database exists, which it works on. It runs two jobs at once:
    the filesystem test's three jobs then overlap their Spark start-ups. Yields the
    directory of its and beat's logs."""
    logs = tmp_path_factory.mktemp("celery")
    with celery_worker(logs, scenario.bootstrap, beat=True, concurrency=2):
        yield logs


def log_tails(logs: Path) -> str:
    return "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-3000:]}"
                     for log in sorted(logs.glob("*.log")))


@pytest.fixture
def analyst() -> Client:
    user: User = make_user("analyst", Capability.RUN_ANALYSES)
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def launch(client: Client, job: str, **params: Any) -> int:
    answer = client.post("/api/v1/analysis", {"job": job, "window_minutes": 30, **params},
                         content_type="application/json")
    assert answer.status_code == 202, answer.content
    assert answer.json()["status"] == "QUEUED"
    return int(answer.json()["id"])


def results(client: Client, run_id: int) -> dict[str, list[dict[str, Any]]]:
    run = wait_for(run_id, *(s.value for s in (AnalysisStatus.SUCCEEDED, AnalysisStatus.FAILED,
                                               AnalysisStatus.CANCELLED)))
    assert run.status == AnalysisStatus.SUCCEEDED, run.error
    assert run.started_at is not None and run.finished_at is not None
    assert run.tasks_total == 0 or run.tasks_done <= run.tasks_total
    body = client.get(f"/api/v1/analysis/{run_id}/results").json()
    return {name: table["rows"] for name, table in body["tables"].items()}


def test_jobs_run_by_a_celery_worker_on_the_filesystem_transport_match_the_scenario(
    scenario: Scenario, analyst: Client, worker: Path
) -> None:
    eta = launch(analyst, "eta", groups=[scenario.group])
    sla = launch(analyst, "sla", groups=[scenario.group], threshold_s=SLA_THRESHOLD_S,
                 objective=OBJECTIVE)
    hot = launch(analyst, "hot_partitions", topics=[scenario.topic], hot_factor=HOT_FACTOR)
    check_eta(scenario, results(analyst, eta))
    check_sla(scenario, results(analyst, sla), AnalysisRun.objects.get(pk=sla).parameters)
    check_hot_partitions(scenario, results(analyst, hot))
    assert AuditEntry.objects.filter(action="analysis.launch", result="ok").count() == 3


def test_through_redis_a_job_over_a_window_with_no_data_succeeds_with_empty_results(
    scenario: Scenario, analyst: Client, tmp_path: Path
) -> None:
    with celery_worker(tmp_path, scenario.bootstrap, broker_url="redis://127.0.0.1:6379/0"):
        empty = launch(analyst, "lag_summary", groups=[scenario.group], window_minutes=5,
                       until="2020-01-01T00:00:00Z")
        tables = results(analyst, empty)
        # Past the forms (a schedule's stored params, say): the job's own error, readable.
        broken = actions.launch_analysis(None, "sla", {"since": "yesterday", "until": 0})
        failed = wait_for(broken.pk, AnalysisStatus.FAILED, AnalysisStatus.SUCCEEDED)
    assert tables and all(rows == [] for rows in tables.values())
    assert failed.status == AnalysisStatus.FAILED and failed.result is None
    assert failed.error == "ParamError: since must be epoch seconds, got 'yesterday'"


def test_the_same_job_on_a_spark_standalone_cluster_gives_the_same_results(
    scenario: Scenario, analyst: Client, tmp_path: Path, spark_cluster: SparkCluster
) -> None:
    """The values check_eta accepts are the ones local[2] gave in the first test; the
    master's own list of finished applications shows the job ran there, not on local."""
    earlier = {app["id"] for app in spark_cluster.state().get("completedapps", [])}
    with celery_worker(tmp_path, scenario.bootstrap, master=spark_cluster.url):
        eta = launch(analyst, "eta", groups=[scenario.group])
        check_eta(scenario, results(analyst, eta))
    assert AnalysisRun.objects.get(pk=eta).master == spark_cluster.url
    apps = [app["name"] for app in spark_cluster.state().get("completedapps", [])
            if app["id"] not in earlier]
    assert apps == ["millrace-eta"]


def test_a_schedule_made_through_the_api_is_launched_by_beat_and_run_by_the_worker(
    scenario: Scenario, analyst: Client, worker: Path
) -> None:
    """Due at once (never launched); beat looks every second, the worker launches it and
    then runs the launched job like any other."""
    made = analyst.post("/api/v1/analysis/schedules", {
        "name": "eta-every-hour", "job": "eta", "groups": [scenario.group],
        "window_minutes": 30, "every_minutes": 60}, content_type="application/json")
    assert made.status_code == 201, made.content
    deadline = time.monotonic() + 120
    while not (runs := list(AnalysisRun.objects.filter(schedule_id=made.json()["id"]))):
        assert time.monotonic() < deadline, "beat launched nothing\n" + log_tails(worker)
        time.sleep(0.5)
    check_eta(scenario, results(analyst, runs[0].pk))
    (run,) = AnalysisRun.objects.filter(schedule_id=made.json()["id"])  # once an hour: once
    assert run.requested_by is None
    assert run.parameters["until"] - run.parameters["since"] == pytest.approx(30 * 60)
    assert AuditEntry.objects.filter(action="analysis.launch", username="platform").exists()


# --- what the scenario implies, computed here from the samples it wrote --------------------


def check_eta(scenario: Scenario, tables: dict[str, list[dict[str, Any]]]) -> None:
    last = {s.partition: s.lag for s in scenario.samples}  # samples are in time order
    partitions = {r["partition"]: r for r in tables["partitions"] if r["group"] == scenario.group}
    assert set(partitions) == set(PARTITIONS)
    for partition, (_, consume) in PARTITIONS.items():
        row = partitions[partition]
        assert row["lag"] == last[partition]
        assert row["consume_rate"] == pytest.approx(consume, rel=1e-3)
        assert row["produce_rate"] == pytest.approx(PRODUCE_RATE, rel=1e-3)
        if consume <= PRODUCE_RATE:
            assert row["progress"] == "never" and row["eta_seconds"] is None
        else:
            assert row["progress"] == "catching_up"
            expected = last[partition] / (consume - PRODUCE_RATE)
            assert row["eta_seconds"] == pytest.approx(expected, rel=1e-3)
    (group,) = [r for r in tables["groups"] if r["group"] == scenario.group]
    lags = list(last.values())
    mean = sum(lags) / len(lags)
    gini = sum(abs(a - b) for a in lags for b in lags) / (2 * len(lags) ** 2 * mean)
    assert group["progress"] == "never"  # p0's consumer is slower than its producer
    assert group["total_lag"] == sum(lags)
    assert group["skew_max_over_mean"] == pytest.approx(max(lags) / mean)
    assert group["skew_gini"] == pytest.approx(gini)


def check_sla(scenario: Scenario, tables: dict[str, list[dict[str, Any]]],
              params: dict[str, Any]) -> None:  # fmt: skip
    worst: dict[int, float] = defaultdict(float)
    for s in scenario.samples:
        minute = math.floor(s.timestamp_ms / 1000 / 60) * 60
        worst[minute] = max(worst[minute], s.lag_seconds or 0.0)
    breaches = sum(1 for seconds in worst.values() if seconds > SLA_THRESHOLD_S)
    assert 0 < breaches < len(worst)  # the scenario crosses the threshold midway
    window = (params["until"] - params["since"]) / 60
    (row,) = [r for r in tables["groups"] if r["group"] == scenario.group]
    assert row["breach_minutes"] == breaches
    assert row["observed_minutes"] == len(worst)
    assert row["window_minutes"] == pytest.approx(window)
    assert row["budget_left_minutes"] == pytest.approx((1 - OBJECTIVE) * window - breaches)


def check_hot_partitions(scenario: Scenario, tables: dict[str, list[dict[str, Any]]]) -> None:
    counts = scenario.messages
    mean = sum(counts.values()) / 4
    rows = {r["partition"]: r for r in tables["partitions"] if r["topic"] == scenario.topic}
    assert {p: r["messages"] for p, r in rows.items()} == dict(counts)
    assert {p for p, r in rows.items() if r["hot"]} == {
        p for p, n in counts.items() if n >= HOT_FACTOR * mean}
    assert any(r["hot"] for r in rows.values())  # the `hot` key makes its partition hot
    top = max(tables["keys"], key=lambda r: r["messages"])
    assert (top["key"], top["messages"]) == scenario.keys.most_common(1)[0]
    assert top["share"] == pytest.approx(scenario.keys["hot"] / sum(scenario.keys.values()))
