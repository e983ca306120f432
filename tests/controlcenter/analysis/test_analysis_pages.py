"""Launching, cancelling and reading lag analyses through the pages and /api/v1/analysis,
with the real Django test client: bad input is refused before anything is queued, state
changes need the permission and reach the audit log, results download as JSON and CSV.
With two clusters, runs and schedules are their cluster's: the lists show the current
one's, a launch goes to the cluster it was made for or nowhere, and the Spark job reads the
run's cluster."""

from __future__ import annotations

import csv
import io
import uuid
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone

from clusterclient.clusters import KafkaCluster
from controlcenter import actions, clusters, tasks
from controlcenter.access import Capability
from controlcenter.analysis import execute
from controlcenter.analysis.schedules import ScheduleSpec
from controlcenter.models import (
    AnalysisRun,
    AnalysisSchedule,
    AnalysisStatus,
    AuditEntry,
    GroupState,
    TopicState,
)
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db

RESULT = {
    "job": "sla",
    "tables": {"groups": {"columns": ["group", "breach_minutes", "budget_left_fraction"],
                          "rows": [{"group": "billing", "breach_minutes": 3,
                                    "budget_left_fraction": None}]}},
    "charts": {"breach_minutes": {"x": ["billing"], "y": {"breach_minutes": [3]}}},
}


@pytest.fixture(autouse=True)
def cluster(kafka_bootstrap: str) -> Any:
    """Names the read model lacks are looked up on a real cluster, never a dead address."""
    now = timezone.now()
    GroupState.objects.create(group_id="billing", state="Stable", updated_at=now)
    TopicState.objects.create(name="orders", partitions=3, replication_factor=1, updated_at=now)
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):
        yield


BACKUP = "backup"


@pytest.fixture
def backup(settings: Any, kafka_bootstrap: str) -> str:
    """A second configured cluster (the same broker under another name, as a cluster reached
    through a second listener would be), with a group only its read model knows."""
    settings.KAFKA_EXTRA_CLUSTERS = (KafkaCluster(BACKUP, kafka_bootstrap),)
    with clusters.using(BACKUP):
        GroupState.objects.create(group_id="billing-backup", state="Stable",
                                  updated_at=timezone.now())
    return BACKUP


@pytest.fixture
def analyst() -> User:
    return make_user("analyst", Capability.RUN_ANALYSES)


def signed_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_a_launch_with_bad_input_is_refused_on_the_form_and_nothing_is_queued(
    analyst: User, django_capture_on_commit_callbacks: Any
) -> None:
    client = signed_in(analyst)
    cases = [
        ("sla", {"groups": "billing, nosuchgroup", "window_minutes": 60, "threshold_s": 30,
                 "objective": 0.99}, "Unknown consumer group(s): nosuchgroup"),
        ("sla", {"groups": "billing", "window_minutes": 0, "threshold_s": 30,
                 "objective": 0.99}, "greater than or equal to 1"),
        ("sla", {"groups": "billing", "window_minutes": 60, "threshold_s": 30,
                 "objective": 1.5}, "between 0 and 1"),
        ("sla", {"groups": "billing", "window_minutes": 60, "threshold_s": -4,
                 "objective": 0.99}, "greater than or equal to 0.001"),
        ("hot_partitions", {"topics": "orders nosuchtopic", "window_minutes": 60,
                            "hot_factor": 1.5, "top_keys": 5}, "Unknown topic(s): nosuchtopic"),
        ("hot_partitions", {"topics": "", "window_minutes": 60, "hot_factor": 1.5,
                            "top_keys": 5}, "This field is required"),
    ]
    with django_capture_on_commit_callbacks() as queued:
        for job, data, error in cases:
            response = client.post(f"/analytics/new/{job}/", data)
            assert response.status_code == 400, (job, data)
            assert error in response.content.decode(), (job, data)
    assert not queued and not AnalysisRun.objects.exists()


def test_the_api_answers_bad_input_with_an_error_code_before_queueing(analyst: User) -> None:
    client = signed_in(analyst)
    unknown_job = client.post("/api/v1/analysis", {"job": "astrology"},
                              content_type="application/json")
    assert unknown_job.status_code == 400
    assert unknown_job.json()["error_code"] == "INVALID_REQUEST"
    empty = client.post("/api/v1/analysis", {"job": "eta", "groups": ["billing"],
                                              "window_minutes": -5},
                        content_type="application/json")
    assert empty.status_code == 400 and "window_minutes" in empty.json()["fields"]
    ghost = client.post("/api/v1/analysis", {"job": "eta", "groups": ["ghost"]},
                        content_type="application/json")
    assert ghost.status_code == 400 and "ghost" in ghost.json()["message"]
    assert not AnalysisRun.objects.exists()


def test_launching_needs_the_permission(viewer: User) -> None:
    anonymous = Client().post("/api/v1/analysis", {"job": "eta"},
                              content_type="application/json")
    assert anonymous.status_code == 403  # DRF: sign in first
    assert anonymous.json()["error_code"] == "NOT_AUTHENTICATED"
    page = Client().post("/analytics/new/eta/", {"window_minutes": 60})
    assert page.status_code == 302 and "/login/" in page["Location"]
    refused = signed_in(viewer).post("/api/v1/analysis", {"job": "eta"},
                                     content_type="application/json")
    assert refused.status_code == 403
    assert not AnalysisRun.objects.exists()


def test_a_launch_queues_one_task_after_commit_and_is_audited(
    analyst: User, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as queued:
        response = signed_in(analyst).post("/analytics/new/sla/", {
            "groups": "billing", "window_minutes": 30, "threshold_s": 45, "objective": 0.95})
    run = AnalysisRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/analytics/runs/{run.pk}/"
    assert len(queued) == 1
    assert run.status == AnalysisStatus.QUEUED and run.requested_by == analyst
    params = run.parameters
    assert params["groups"] == ["billing"] and params["threshold_s"] == 45
    assert params["until"] - params["since"] == pytest.approx(30 * 60)
    entry = AuditEntry.objects.get(action="analysis.launch")
    assert entry.username == "analyst" and entry.result == "ok"


def test_cancelling_a_queued_run_ends_it_at_once_and_a_finished_one_cannot_be(
    analyst: User,
) -> None:
    run = AnalysisRun.objects.create(job="eta", parameters={})
    client = signed_in(analyst)
    answer = client.post(f"/api/v1/analysis/{run.pk}/cancel")
    assert answer.status_code == 202 and answer.json()["status"] == "CANCELLED"
    run.refresh_from_db()
    assert run.status == AnalysisStatus.CANCELLED and run.result is None
    again = client.post(f"/api/v1/analysis/{run.pk}/cancel")
    assert again.status_code == 400 and again.json()["error_code"] == "RUN_FINISHED"
    assert AuditEntry.objects.filter(action="analysis.cancel").count() == 2


def test_a_running_run_gets_the_flag_its_task_polls(analyst: User) -> None:
    run = AnalysisRun.objects.create(job="eta", parameters={}, status=AnalysisStatus.RUNNING,
                                     started_at=timezone.now())
    status = actions.cancel_analysis(analyst, run)
    run.refresh_from_db()
    assert status == AnalysisStatus.RUNNING and run.cancel_requested


def test_a_finished_run_shows_its_tables_and_downloads_as_json_and_csv() -> None:
    run = AnalysisRun.objects.create(job="sla", parameters={"since": 0, "until": 60},
                                     status=AnalysisStatus.SUCCEEDED, result=RESULT,
                                     started_at=timezone.now(), finished_at=timezone.now())
    client = Client()
    page = client.get(f"/analytics/runs/{run.pk}/").content.decode()
    assert 'id="table-groups"' in page and 'data-chart="breach_minutes"' in page
    assert client.get(f"/api/v1/analysis/{run.pk}/results").json() == RESULT
    download = client.get(f"/analytics/runs/{run.pk}/download.csv?table=groups")
    assert download["Content-Disposition"].endswith('-groups.csv"')
    rows = list(csv.reader(io.StringIO(download.content.decode())))
    assert rows == [["group", "breach_minutes", "budget_left_fraction"], ["billing", "3", ""]]
    assert client.get(f"/analytics/runs/{run.pk}/download.csv?table=nope").status_code == 404
    as_json = client.get(f"/analytics/runs/{run.pk}/download.json")
    assert as_json["Content-Type"] == "application/json"


def test_a_failed_run_shows_sparks_error_and_has_no_results() -> None:
    run = AnalysisRun.objects.create(job="eta", parameters={}, status=AnalysisStatus.FAILED,
                                     error="AnalysisException: [PATH_NOT_FOUND] x")
    page = Client().get(f"/analytics/runs/{run.pk}/").content.decode()
    assert "AnalysisException: [PATH_NOT_FOUND] x" in page
    answer = Client().get(f"/api/v1/analysis/{run.pk}/results")
    assert answer.status_code == 404 and answer.json()["error_code"] == "NO_RESULT"


def test_due_schedules_launch_with_a_fresh_window_and_others_wait(
    analyst: User, django_capture_on_commit_callbacks: Any
) -> None:
    name = f"nightly-{uuid.uuid4().hex[:6]}"
    actions.save_analysis_schedule(analyst, ScheduleSpec(name, "eta", {"groups": ["billing"]},
                                                         90, 60))
    AnalysisSchedule.objects.create(name="recent", job="eta", every_minutes=60,
                                    last_launched_at=timezone.now())
    with django_capture_on_commit_callbacks() as queued:
        runs = actions.launch_due_analyses()
    assert [r.schedule.name for r in runs if r.schedule] == [name] and len(queued) == 1
    params = runs[0].parameters
    assert params["groups"] == ["billing"]
    assert params["until"] - params["since"] == pytest.approx(90 * 60)
    assert actions.launch_due_analyses() == []  # launched a moment ago: not due again


def test_runs_a_killed_worker_left_running_end_failed_when_it_is_back() -> None:
    mine = AnalysisRun.objects.create(job="eta", status=AnalysisStatus.RUNNING,
                                      worker="millrace-analytics@a", started_at=timezone.now())
    other = AnalysisRun.objects.create(job="eta", status=AnalysisStatus.RUNNING,
                                       worker="millrace-analytics@b", started_at=timezone.now())
    assert actions.fail_orphaned_analyses("millrace-analytics@a") == 1
    mine.refresh_from_db()
    other.refresh_from_db()
    assert mine.status == AnalysisStatus.FAILED and "stopped" in mine.error
    assert other.status == AnalysisStatus.RUNNING


def test_a_schedule_saved_from_the_form_is_listed_paused_resumed_and_deleted(
    analyst: User, viewer: User
) -> None:
    client = signed_in(analyst)
    launched = client.post("/analytics/new/eta/", {
        "groups": "billing", "window_minutes": 90, "schedule_name": "eta-hourly",
        "every_minutes": 60})
    assert launched.status_code == 302
    schedule = AnalysisSchedule.objects.get(name="eta-hourly")
    assert (schedule.job, schedule.parameters) == ("eta", {"groups": ["billing"]})
    assert (schedule.window_minutes, schedule.every_minutes) == (90, 60)
    row = f'id="analysis-schedule-{schedule.pk}"'
    assert row in client.get("/analytics/").content.decode()
    base = f"/analytics/schedules/{schedule.pk}"
    assert signed_in(viewer).post(f"{base}/disable/").status_code == 403
    assert client.post(f"{base}/disable/").status_code == 302
    schedule.refresh_from_db()
    assert not schedule.enabled
    assert "PAUSED" in client.get("/analytics/").content.decode()
    client.post(f"{base}/enable/")
    schedule.refresh_from_db()
    assert schedule.enabled
    assert client.post(f"{base}/delete/").status_code == 302
    assert not AnalysisSchedule.objects.exists()
    assert list(AuditEntry.objects.filter(action__startswith="analysis.schedule")
                .order_by("id").values_list("action", flat=True)) == [
        "analysis.schedule.create", "analysis.schedule.disable", "analysis.schedule.enable",
        "analysis.schedule.delete"]


# --- several clusters ---------------------------------------------------------------------


def listed_ids(answer: Any) -> list[int]:
    return [row["id"] for row in answer.json()["results"]]


def test_the_lists_show_the_current_clusters_runs_and_schedules_or_every_clusters(
    analyst: User, backup: str
) -> None:
    default = clusters.default_name()
    mine = AnalysisRun.objects.create(job="eta", parameters={})
    theirs = AnalysisRun.objects.create(job="sla", cluster=backup, parameters={})
    AnalysisSchedule.objects.create(name="eta-default", job="eta")
    AnalysisSchedule.objects.create(name="sla-backup", job="sla", cluster=backup)
    assert mine.cluster == default  # made while looking at the default cluster
    client = signed_in(analyst)
    page = client.get("/analytics/").content.decode()
    assert f"Cluster <strong>{default}</strong> only" in page
    assert f'id="analysis-row-{mine.pk}"' in page and f'id="analysis-row-{theirs.pk}"' not in page
    assert "eta-default" in page and "sla-backup" not in page
    every = client.get("/analytics/", {"cluster": "all"}).content.decode()
    assert f'id="analysis-row-{theirs.pk}" data-cluster="{backup}"' in every
    assert "sla-backup" in every and "Every cluster" in every
    api = signed_in(analyst)
    assert listed_ids(api.get("/api/v1/analysis")) == [mine.pk]
    assert listed_ids(api.get("/api/v1/analysis", {"cluster": "all"})) == [theirs.pk, mine.pk]
    on_backup = api.get("/api/v1/analysis", {"cluster": backup})
    assert listed_ids(on_backup) == [theirs.pk]
    assert on_backup.json()["results"][0]["cluster"] == backup
    # `?cluster=backup` above also switched this session's cluster, as the switcher does
    assert [s["name"] for s in api.get("/api/v1/analysis/schedules").json()] == ["sla-backup"]
    nope = api.get("/api/v1/analysis/schedules", {"cluster": "nope"})
    assert nope.status_code == 400 and nope.json() == {
        "error_code": "UNKNOWN_CLUSTER",
        "message": f"Cluster 'nope' is not configured (configured: {default}, {backup})."}
    # The switcher's choice (kept in the session) is the pages' default.
    switched = client.get("/analytics/", {"cluster": backup}).content.decode()
    assert f'id="analysis-row-{theirs.pk}"' in switched and "eta-default" not in switched
    assert f'id="analysis-row-{mine.pk}"' not in client.get("/analytics/").content.decode()


def test_the_launch_form_launches_on_the_cluster_it_was_shown_for_or_says_why_not(
    analyst: User, backup: str, django_capture_on_commit_callbacks: Any
) -> None:
    client = signed_in(analyst)
    form = client.get("/analytics/new/eta/", {"cluster": backup}).content.decode()
    assert f'name="cluster" value="{backup}"' in form
    client.get("/", {"cluster": clusters.default_name()})  # switched back, in another tab
    launch = {"groups": "billing-backup", "window_minutes": 30, "cluster": backup}
    with django_capture_on_commit_callbacks() as queued:
        response = client.post("/analytics/new/eta/", launch)
    run = AnalysisRun.objects.get()
    assert response.status_code == 302 and len(queued) == 1
    assert run.cluster == backup and "cluster" not in run.parameters
    entry = AuditEntry.objects.get(action="analysis.launch")
    assert entry.cluster == backup and entry.message == f"run {run.pk} queued on {backup}"
    # A form shown before the platform restarted without that cluster.
    with django_capture_on_commit_callbacks() as queued:
        stale = client.post("/analytics/new/eta/", {**launch, "cluster": "gone",
                                                    "schedule_name": "eta-gone",
                                                    "every_minutes": 5})
    text = stale.content.decode()
    assert stale.status_code == 400 and "Cluster &#x27;gone&#x27; is not configured" in text
    assert "Nothing was launched or scheduled" in text
    assert not queued and AnalysisRun.objects.count() == 1
    assert not AnalysisSchedule.objects.exists()


def test_the_api_refuses_a_cluster_that_is_not_configured(analyst: User) -> None:
    client = signed_in(analyst)
    launch = {"job": "eta", "groups": ["billing"]}
    for path, body in (("/api/v1/analysis", {**launch, "cluster": "nope"}),
                       ("/api/v1/analysis?cluster=nope", launch),
                       ("/api/v1/analysis/schedules", {**launch, "name": "n", "cluster": "nope",
                                                       "every_minutes": 5})):
        answer = client.post(path, body, content_type="application/json")
        assert answer.status_code == 400, path
        assert answer.json()["error_code"] == "UNKNOWN_CLUSTER", path
        assert "Cluster 'nope' is not configured" in answer.json()["message"], path
    assert not AnalysisRun.objects.exists() and not AnalysisSchedule.objects.exists()
    launched = client.post("/api/v1/analysis", launch, content_type="application/json")
    assert launched.status_code == 202 and launched.json()["cluster"] == clusters.default_name()


def test_a_schedule_of_a_cluster_no_longer_configured_gets_a_failed_run_saying_so(
    analyst: User, django_capture_on_commit_callbacks: Any
) -> None:
    stale = AnalysisSchedule.objects.create(name="stale", job="eta", cluster="gone",
                                            parameters={"groups": ["billing"]})
    with django_capture_on_commit_callbacks() as queued:
        (run,) = actions.launch_due_analyses()
    assert not queued  # never queued, so never run against another cluster
    run.refresh_from_db()
    assert (run.status, run.cluster, run.schedule_id) == (AnalysisStatus.FAILED, "gone", stale.pk)
    assert run.error.startswith("Not run: Cluster 'gone' is not configured (configured: ")
    entry = AuditEntry.objects.get(action="analysis.launch")
    assert entry.result == "error" and entry.cluster == clusters.default_name()
    page = signed_in(analyst).get("/analytics/").content.decode()
    assert 'id="stranded-schedules"' in page
    assert "Schedules of clusters no longer configured (gone)" in page


def test_a_run_whose_cluster_went_away_fails_at_its_task_without_a_job() -> None:
    run = AnalysisRun.objects.create(job="eta", cluster="gone", parameters={"since": 0,
                                                                            "until": 60})
    assert tasks.run_analysis_task.apply(args=(run.pk,)).get() == AnalysisStatus.FAILED
    run.refresh_from_db()
    assert run.status == AnalysisStatus.FAILED and run.started_at is None and not run.master
    assert run.error.startswith("Not run: Cluster 'gone' is not configured")


def test_a_runs_spark_job_reads_the_cluster_it_was_launched_for(
    settings: Any, tmp_path: Any
) -> None:
    login = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
    settings.KAFKA_EXTRA_CLUSTERS = (KafkaCluster(BACKUP, "b1:9093,b2:9093", login),)
    on_backup = AnalysisRun.objects.create(job="eta", cluster=BACKUP, parameters={"since": 1})
    command = execute.job_command(on_backup, tmp_path / "result.json", "local[1]")
    assert command.params == {"since": 1, "bootstrap": "b1:9093,b2:9093", "kafka_config": login}
    assert "b1:9093,b2:9093" in " ".join(command.argv())
    on_default = AnalysisRun.objects.create(job="eta", parameters={"since": 1})
    params = execute.job_command(on_default, tmp_path / "result.json", "local[1]").params
    assert params["bootstrap"] == django_settings.KAFKA_BOOTSTRAP_SERVERS
    settings.KAFKA_EXTRA_CLUSTERS = ()
    with pytest.raises(clusters.UnknownCluster, match="'backup' is not configured"):
        execute.job_command(on_backup, tmp_path / "result.json", "local[1]")
