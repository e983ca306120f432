"""Lag analytics end to end on a consumer group that really lags (issue 21): a producer at
known rates, a slow confluent-kafka consumer group and a fast one, the real collector writing
their lag history to `_millrace-lag-samples`, and jobs queued through the API (or launched by
beat from a schedule) run by a real Celery worker as Spark jobs, locally and on a Spark
standalone cluster. ETA, skew, SLA minutes and hot partitions are checked against what this
test computes from what it produced and consumed (`analysis_workload.py`)."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from controlcenter import actions
from controlcenter.access import Capability
from controlcenter.models import AnalysisRun, AnalysisStatus, AuditEntry
from laganalysis.burrow import Status
from laganalysis.records import LagSample, encode_lag_sample
from tests.controlcenter.analysis.analysis_worker import celery_worker, wait_for
from tests.controlcenter.analysis.analysis_workload import BACKLOG, PRODUCE, Workload, run_workload
from tests.controlcenter.conftest import PASSWORD, make_user
from tests.laganalysis.history import T0
from tests.sparkcluster import SparkCluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
SLA_THRESHOLD_S, OBJECTIVE, HOT_FACTOR = 30.0, 0.9, 1.5
ENDED = tuple(s.value for s in (AnalysisStatus.SUCCEEDED, AnalysisStatus.FAILED,
                                AnalysisStatus.CANCELLED))  # fmt: skip


@pytest.fixture(scope="module")
def workload(kafka_bootstrap: str, django_db_setup: None, django_db_blocker: Any) -> Workload:
    return run_workload(kafka_bootstrap, django_db_blocker.unblock)


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, django_db_setup: None, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[Path]:  # fmt: skip
    """One worker with beat on Redis, running two jobs at once (their Spark start-ups
    overlap), for the tests on local[2]; the standalone cluster's test starts its own on the
    filesystem transport. The worker, beat and the standalone cluster's JVMs (when a test
    here will ask for it) start while the workload runs: it mostly waits on its own clock.
    Yields the directory of its and beat's logs."""
    if any("spark_cluster" in getattr(item, "fixturenames", ()) for item in request.session.items
           if getattr(item, "module", None) is request.module):  # fmt: skip
        request.getfixturevalue("spark_cluster_starting")
    logs = tmp_path_factory.mktemp("celery")
    with celery_worker(logs, kafka_bootstrap, broker_url="redis://127.0.0.1:6379/0",
                       beat=True, concurrency=2, wait=False) as ready:
        request.getfixturevalue("workload")
        ready()
        yield logs


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
    return int(answer.json()["id"])


def results(client: Client, run_id: int) -> dict[str, list[dict[str, Any]]]:
    run = wait_for(run_id, *ENDED)
    assert run.status == AnalysisStatus.SUCCEEDED, run.error
    assert run.tasks_total > 0 and run.tasks_done == run.tasks_total
    body = client.get(f"/api/v1/analysis/{run_id}/results").json()
    return {name: table["rows"] for name, table in body["tables"].items()}


def test_jobs_run_by_celery_on_local_spark_match_what_was_produced_and_consumed(
    worker: Path, workload: Workload, analyst: Client
) -> None:
    """ETA comes from a schedule (due at once; beat looks every second), hot partitions
    from the API; the two run at once."""
    groups = [workload.slow_group, workload.fast_group]
    made = analyst.post("/api/v1/analysis/schedules", {
        "name": "eta-every-hour", "job": "eta", "groups": groups, "window_minutes": 30,
        "every_minutes": 60}, content_type="application/json")  # fmt: skip
    assert made.status_code == 201, made.content
    hot = launch(analyst, "hot_partitions", topics=[workload.topic], hot_factor=HOT_FACTOR)
    deadline = time.monotonic() + 120
    while not (runs := list(AnalysisRun.objects.filter(schedule_id=made.json()["id"]))):
        assert time.monotonic() < deadline, "beat launched nothing"
        time.sleep(0.5)
    check_eta(workload, results(analyst, runs[0].pk))
    check_hot_partitions(workload, results(analyst, hot))
    (run,) = AnalysisRun.objects.filter(schedule_id=made.json()["id"])  # once an hour: once
    assert run.requested_by is None
    assert run.parameters["until"] - run.parameters["since"] == pytest.approx(30 * 60)
    assert AuditEntry.objects.filter(action="analysis.launch", username="platform").exists()
    assert AuditEntry.objects.filter(action="analysis.launch", result="ok").count() == 2


def test_a_job_on_a_spark_standalone_cluster_matches_too(
    workload: Workload, analyst: Client, tmp_path: Path, spark_cluster: SparkCluster
) -> None:
    """SLA minutes, on a master and worker; the master's own list of finished applications
    shows the job ran there."""
    earlier = {app["id"] for app in spark_cluster.state().get("completedapps", [])}
    with celery_worker(tmp_path, workload.bootstrap, master=spark_cluster.url):
        sla = launch(analyst, "sla", groups=[workload.slow_group, workload.fast_group],
                     threshold_s=SLA_THRESHOLD_S, objective=OBJECTIVE)
        check_sla(workload, results(analyst, sla), AnalysisRun.objects.get(pk=sla).parameters)
    assert AnalysisRun.objects.get(pk=sla).master == spark_cluster.url
    apps = [app["name"] for app in spark_cluster.state().get("completedapps", [])
            if app["id"] not in earlier]
    assert apps == ["millrace-sla"]


def test_through_redis_a_running_job_is_cancelled_from_its_page_and_failures_show_their_errors(
    worker: Path, workload: Workload, analyst: Client, tmp_path: Path
) -> None:
    """A job on local[2] whose completed tasks go up is cancelled with the page's form, mid
    computation. Past the forms (a schedule's stored params, say): the job's own parameter
    error, found before Spark starts, and Spark's own error for input it cannot read."""
    history = write_history_files(tmp_path / "history", files=8, rows_each=40_000)
    # The module's worker (on Redis, two at once): the long job and the two failures.
    long = actions.launch_analysis(None, "lag_summary", {"samples_path": str(history)})
    broken = actions.launch_analysis(None, "sla", {"since": "yesterday", "until": 0})
    missing = actions.launch_analysis(None, "lag_summary",
                                      {"samples_path": str(tmp_path / "nowhere")})
    seen = progress_until(long.pk, lambda run: 0 < run.tasks_done < run.tasks_total)
    answer = analyst.post(f"/analytics/runs/{long.pk}/cancel/", follow=True)
    assert answer.status_code == 200
    cancelled = wait_for(long.pk, *ENDED)
    bad = wait_for(broken.pk, *ENDED)
    failed = wait_for(missing.pk, *ENDED)
    dones = [done for done, _ in seen]
    assert dones == sorted(dones) and dones[-1] > 0, seen  # the bar's completed tasks go up
    assert cancelled.status == AnalysisStatus.CANCELLED and cancelled.result is None, \
        cancelled.error
    assert not (settings.MILLRACE_ANALYSIS_DIR / str(long.pk)).exists()
    assert bad.status == AnalysisStatus.FAILED and bad.result is None
    assert bad.error == "ParamError: since must be epoch seconds, got 'yesterday'"
    assert failed.status == AnalysisStatus.FAILED and failed.result is None
    assert failed.error.startswith("AnalysisException: [PATH_NOT_FOUND]"), failed.error
    assert "nowhere" in failed.error and "\tat org.apache" not in failed.error
    page = analyst.get(f"/analytics/runs/{missing.pk}/").content.decode()
    assert "PATH_NOT_FOUND" in page


def write_history_files(folder: Path, files: int, rows_each: int) -> Path:
    """Lag samples as the collector writes them, in `files` files: one Spark task each."""
    folder.mkdir()
    for n in range(files):
        with (folder / f"part-{n}.jsonl").open("wb") as out:
            for i in range(rows_each):
                sample = LagSample(f"g{i % 20}", "t", i % 7, (T0 + i) * 1000, i, i + 10, 10,
                                   1.0, Status.OK)
                out.write(encode_lag_sample(sample)[1] + b"\n")
    return folder


def progress_until(run_id: int, done: Callable[[AnalysisRun], bool],
                   timeout: float = 300) -> list[tuple[int, int]]:  # fmt: skip
    """The (tasks done, tasks total) a running run showed, until `done` holds."""
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    while True:
        run = AnalysisRun.objects.get(pk=run_id)
        assert run.status in (AnalysisStatus.QUEUED, AnalysisStatus.RUNNING), run.error
        if run.tasks_total and (not seen or seen[-1] != (run.tasks_done, run.tasks_total)):
            seen.append((run.tasks_done, run.tasks_total))
        if done(run):
            return seen
        assert time.monotonic() < deadline, f"run {run_id} showed only {seen}"
        time.sleep(0.1)


# --- what the workload implies, computed here from what it produced and consumed ----------


def check_eta(work: Workload, tables: dict[str, list[dict[str, Any]]]) -> None:
    """The first sample saw the offsets before anything moved, the last after everything
    stopped; each sample's time lies within its cycle, which bounds the rates and ETAs."""
    first, last = work.cycles[0], work.cycles[-1]
    shortest, longest = last.started - first.ended - 0.002, last.ended - first.started + 0.002
    rows = {(r["group"], r["partition"]): r for r in tables["partitions"]
            if r["group"] in (work.slow_group, work.fast_group)}  # fmt: skip
    assert set(rows) == {(g, p) for g in (work.slow_group, work.fast_group) for p in PRODUCE}
    lags = {}
    for p in PRODUCE:
        produced = work.produced[p] - BACKLOG[p]
        consumed = work.committed[work.slow_group][p]
        row = rows[(work.slow_group, p)]
        lags[p] = work.produced[p] - consumed
        assert row["lag"] == lags[p]
        assert produced / longest <= row["produce_rate"] <= produced / shortest, row
        assert consumed / longest <= row["consume_rate"] <= consumed / shortest, row
        if consumed <= produced:
            assert row["progress"] == "never" and row["eta_seconds"] is None
        else:
            assert row["progress"] == "catching_up"
            drained = consumed - produced
            assert lags[p] * shortest / drained <= row["eta_seconds"] <= \
                lags[p] * longest / drained
        fast = rows[(work.fast_group, p)]
        assert fast["lag"] == 0 and fast["progress"] == "caught_up"
    assert rows[(work.slow_group, 0)]["progress"] == "never"  # what the workload is for
    assert all(rows[(work.slow_group, p)]["progress"] == "catching_up" for p in (1, 2, 3))
    groups = {r["group"]: r for r in tables["groups"]}
    slow, mean = groups[work.slow_group], sum(lags.values()) / len(lags)
    gini = sum(abs(a - b) for a in lags.values() for b in lags.values()) / (
        2 * len(lags) ** 2 * mean)
    assert slow["progress"] == "never" and slow["slowest_partition"] == 0
    assert slow["total_lag"] == sum(lags.values())
    assert slow["skew_max_over_mean"] == pytest.approx(max(lags.values()) / mean)
    assert slow["skew_gini"] == pytest.approx(gini)
    assert groups[work.fast_group]["progress"] == "caught_up"
    assert groups[work.fast_group]["total_lag"] == 0


def check_sla(work: Workload, tables: dict[str, list[dict[str, Any]]],
              params: dict[str, Any]) -> None:  # fmt: skip
    """The slow group is behind by more than the threshold from its second sample on (its
    backlog partitions stay hundreds of records behind a 10 records/s producer, and lag in
    seconds is lag over the produce rate); the first has too few points to say. The fast
    group is never more than a commit interval behind. So the slow group breaches in every
    minute a later cycle ran in, the fast one in none."""
    final_lag_s = min((work.produced[p] - work.committed[work.slow_group][p]) / PRODUCE[p]
                      for p in (1, 2, 3))
    assert final_lag_s > 1.5 * SLA_THRESHOLD_S  # the scenario is what this check assumes
    observed, breached = possible_minutes(work.cycles), possible_minutes(work.cycles[1:])
    window = (params["until"] - params["since"]) / 60
    rows = {r["group"]: r for r in tables["groups"]}
    slow, fast = rows[work.slow_group], rows[work.fast_group]
    assert slow["observed_minutes"] in observed and fast["observed_minutes"] in observed
    assert slow["breach_minutes"] in breached and fast["breach_minutes"] == 0
    for row in (slow, fast):
        assert row["window_minutes"] == pytest.approx(window)
        assert row["budget_left_minutes"] == pytest.approx(
            (1 - OBJECTIVE) * window - row["breach_minutes"])


def possible_minutes(cycles: list[Any]) -> set[int]:
    """How many distinct minutes the cycles' samples fall in: one answer, unless a cycle
    straddled a minute's end."""
    choices = [{math.floor(c.started / 60), math.floor(c.ended / 60)} for c in cycles]
    return {len(set(pick)) for pick in itertools.product(*choices)}


def check_hot_partitions(work: Workload, tables: dict[str, list[dict[str, Any]]]) -> None:
    counts = work.produced
    mean = sum(counts.values()) / len(PRODUCE)
    rows = {r["partition"]: r for r in tables["partitions"] if r["topic"] == work.topic}
    assert {p: r["messages"] for p, r in rows.items()} == dict(counts)
    hot = {p for p, n in counts.items() if n >= HOT_FACTOR * mean}
    assert hot and {p for p, r in rows.items() if r["hot"]} == hot
    top = max(tables["keys"], key=lambda r: r["messages"])
    assert (top["key"], top["messages"]) == work.keys.most_common(1)[0]
    assert top["share"] == pytest.approx(top["messages"] / sum(work.keys.values()))
    (topic,) = [r for r in tables["topics"] if r["topic"] == work.topic]
    assert topic["partition_max_over_mean"] == pytest.approx(max(counts.values()) / mean)
