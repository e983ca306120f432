"""The analysis schedules API (/api/v1/analysis/schedules) with the real Django test client:
the launch form's checks answer 400 with field errors before anything is stored, changes
need `run_analyses` and reach the audit log, and beat's view of a schedule (due, enabled)
follows what the API set."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone

from clusterclient.clusters import KafkaCluster
from controlcenter import actions, clusters
from controlcenter.access import Capability
from controlcenter.models import AnalysisRun, AnalysisSchedule, AuditEntry, GroupState, TopicState
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db
API = "/api/v1/analysis/schedules"
NIGHTLY = {"name": "nightly-sla", "job": "sla", "groups": ["billing"], "threshold_s": 30,
           "objective": 0.95, "window_minutes": 120, "every_minutes": 60}


@pytest.fixture(autouse=True)
def cluster(kafka_bootstrap: str) -> Any:
    """Names the read model lacks are looked up on a real cluster, never a dead address."""
    now = timezone.now()
    GroupState.objects.create(group_id="billing", state="Stable", updated_at=now)
    GroupState.objects.create(group_id="payments", state="Stable", updated_at=now)
    TopicState.objects.create(name="orders", partitions=3, replication_factor=1, updated_at=now)
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):
        yield


@pytest.fixture
def analyst() -> Client:
    client = Client()
    user = make_user("analyst", Capability.RUN_ANALYSES)
    assert client.login(username=user.username, password=PASSWORD)
    return client


def send(client: Client, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    return getattr(client, method)(path, body or {}, content_type="application/json")


def test_a_schedule_made_through_the_api_is_stored_listed_and_audited(analyst: Client) -> None:
    made = send(analyst, "post", API, NIGHTLY)
    assert made.status_code == 201, made.content
    body = made.json()
    assert body["name"] == "nightly-sla" and body["job"] == "sla" and body["enabled"]
    assert body["parameters"] == {"groups": ["billing"], "threshold_s": 30.0, "objective": 0.95}
    assert (body["window_minutes"], body["every_minutes"]) == (120, 60)
    assert body["created_by"] == "analyst" and body["last_launched_at"] is None
    assert body["next_launch_at"] is not None and body["runs"] == 0
    (listed,) = analyst.get(API).json()
    assert listed["id"] == body["id"] and listed["parameters"] == body["parameters"]
    assert analyst.get(f"{API}/{body['id']}").json()["name"] == "nightly-sla"
    entry = AuditEntry.objects.get(action="analysis.schedule.create")
    assert entry.username == "analyst" and entry.target == "schedule nightly-sla"
    assert entry.result == "ok" and entry.parameters["every_minutes"] == 60


def test_job_fields_omitted_take_the_launch_forms_defaults(analyst: Client) -> None:
    made = send(analyst, "post", API, {"name": "hot", "job": "hot_partitions",
                                       "topics": ["orders"], "every_minutes": 15})
    assert made.status_code == 201, made.content
    assert made.json()["parameters"] == {"topics": ["orders"], "hot_factor": 1.5,
                                         "top_keys": 20}
    assert made.json()["window_minutes"] == 60


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"groups": ["billing", "ghost"]}, "groups", "Unknown consumer group(s): ghost"),
    ({"window_minutes": 0}, "window_minutes", "greater than or equal to 1"),
    ({"every_minutes": 0}, "every_minutes", "greater than or equal to 1"),
    ({"every_minutes": 7 * 24 * 60 + 1}, "every_minutes", "less than or equal to 10080"),
    ({"objective": 1.5}, "objective", "between 0 and 1"),
    ({"threshold_s": -1}, "threshold_s", "greater than or equal to 0.001"),
    ({"name": "two words"}, "name", "letters, numbers, underscores or hyphens"),
    ({"name": ""}, "name", "This field is required"),
    ({"every_minutes": "hourly"}, "every_minutes", "Enter a whole number"),
    ({"until": "2026-01-01T00:00:00Z"}, "__all__", "A schedule has no 'until'"),
    ({"job": "astrology"}, "job", "Unknown job 'astrology'"),
])  # fmt: skip
def test_bad_input_is_refused_with_field_errors_and_nothing_is_stored(
    analyst: Client, change: dict[str, Any], field: str, words: str
) -> None:
    answer = send(analyst, "post", API, {**NIGHTLY, **change})
    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["error_code"] == "INVALID_REQUEST"
    assert words in " ".join(e["message"] for e in body["fields"][field]), body
    assert not AnalysisSchedule.objects.exists()
    assert not AuditEntry.objects.filter(action__startswith="analysis.schedule").exists()


def test_an_unknown_topic_is_refused_for_hot_partitions(analyst: Client) -> None:
    answer = send(analyst, "post", API, {"name": "hot", "job": "hot_partitions",
                                         "topics": ["orders", "nosuchtopic"],
                                         "every_minutes": 5})
    assert answer.status_code == 400
    assert "Unknown topic(s): nosuchtopic" in answer.json()["fields"]["topics"][0]["message"]


def test_a_name_in_use_is_a_conflict_on_create_and_on_rename(analyst: Client) -> None:
    assert send(analyst, "post", API, NIGHTLY).status_code == 201
    twin = send(analyst, "post", API, {**NIGHTLY, "every_minutes": 5})
    assert twin.status_code == 409 and twin.json()["error_code"] == "SCHEDULE_EXISTS"
    other = send(analyst, "post", API, {**NIGHTLY, "name": "other"}).json()
    rename = send(analyst, "patch", f"{API}/{other['id']}", {"name": "nightly-sla"})
    assert rename.status_code == 409 and rename.json()["error_code"] == "SCHEDULE_EXISTS"
    assert AnalysisSchedule.objects.get(pk=other["id"]).name == "other"
    assert AnalysisSchedule.objects.get(name="nightly-sla").every_minutes == 60
    refused = AuditEntry.objects.filter(action__startswith="analysis.schedule", result="error")
    assert refused.count() == 2


def test_patch_changes_what_it_names_and_put_replaces_everything(analyst: Client) -> None:
    made = send(analyst, "post", API, NIGHTLY).json()
    url = f"{API}/{made['id']}"
    patched = send(analyst, "patch", url, {"every_minutes": 15, "groups": ["payments"]})
    assert patched.status_code == 200, patched.content
    assert patched.json()["every_minutes"] == 15 and patched.json()["window_minutes"] == 120
    assert patched.json()["parameters"] == {"groups": ["payments"], "threshold_s": 30.0,
                                            "objective": 0.95}
    refused = send(analyst, "patch", url, {"groups": ["ghost"]})
    assert refused.status_code == 400 and "groups" in refused.json()["fields"]
    assert AnalysisSchedule.objects.get(pk=made["id"]).parameters["groups"] == ["payments"]
    replaced = send(analyst, "put", url, {"name": "eta-hourly", "job": "eta",
                                          "every_minutes": 60})
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["name"] == "eta-hourly" and replaced.json()["job"] == "eta"
    assert replaced.json()["parameters"] == {} and replaced.json()["window_minutes"] == 60
    actions_logged = AuditEntry.objects.filter(action="analysis.schedule.update")
    assert [e.result for e in actions_logged.order_by("id")] == ["ok", "ok"]


def test_disabled_schedules_are_not_launched_until_enabled(
    analyst: Client, django_capture_on_commit_callbacks: Any
) -> None:
    made = send(analyst, "post", API, NIGHTLY).json()
    disabled = send(analyst, "post", f"{API}/{made['id']}/disable")
    assert disabled.status_code == 200 and disabled.json()["enabled"] is False
    assert disabled.json()["next_launch_at"] is None
    with django_capture_on_commit_callbacks() as queued:
        assert actions.launch_due_analyses() == []
    enabled = send(analyst, "post", f"{API}/{made['id']}/enable")
    assert enabled.json()["enabled"] is True
    with django_capture_on_commit_callbacks() as queued:
        (run,) = actions.launch_due_analyses()
    assert len(queued) == 1 and run.schedule_id == made["id"] and run.job == "sla"
    assert run.parameters["until"] - run.parameters["since"] == pytest.approx(120 * 60)
    schedule = analyst.get(f"{API}/{made['id']}").json()
    assert schedule["runs"] == 1 and schedule["last_launched_at"] is not None
    launched = dt.datetime.fromisoformat(schedule["last_launched_at"])
    assert dt.datetime.fromisoformat(schedule["next_launch_at"]) == launched + dt.timedelta(
        minutes=60)
    assert [e.action for e in AuditEntry.objects.filter(
        action__in=["analysis.schedule.disable", "analysis.schedule.enable"]).order_by("id")
    ] == ["analysis.schedule.disable", "analysis.schedule.enable"]


def test_deleting_a_schedule_keeps_its_runs(analyst: Client) -> None:
    made = send(analyst, "post", API, NIGHTLY).json()
    schedule = AnalysisSchedule.objects.get(pk=made["id"])
    run = AnalysisRun.objects.create(job="sla", schedule=schedule)
    assert analyst.delete(f"{API}/{made['id']}").status_code == 204
    assert analyst.get(f"{API}/{made['id']}").status_code == 404
    assert analyst.delete(f"{API}/{made['id']}").status_code == 404
    run.refresh_from_db()
    assert run.schedule is None
    assert AuditEntry.objects.filter(action="analysis.schedule.delete", result="ok").count() == 1


def test_changes_need_the_permission_and_reads_follow_the_pages(viewer: User) -> None:
    schedule = AnalysisSchedule.objects.create(name="s", job="eta")
    viewer_client = Client()
    assert viewer_client.login(username=viewer.username, password=PASSWORD)
    for client in (Client(), viewer_client):
        assert send(client, "post", API, NIGHTLY).status_code == 403
        assert send(client, "patch", f"{API}/{schedule.pk}", {"every_minutes": 1}
                    ).status_code == 403
        assert send(client, "post", f"{API}/{schedule.pk}/disable").status_code == 403
        assert client.delete(f"{API}/{schedule.pk}").status_code == 403
        assert client.get(API).status_code == 200
    with override_settings(MILLRACE_UI_LOGIN_REQUIRED=True):
        assert Client().get(API).status_code == 403
        assert viewer_client.get(f"{API}/{schedule.pk}").status_code == 200
    schedule.refresh_from_db()
    assert schedule.enabled and schedule.every_minutes == 60
    assert not AuditEntry.objects.exists()


def test_a_changed_schedule_keeps_its_cluster_unless_the_body_names_another(
    analyst: Client, settings: Any, kafka_bootstrap: str
) -> None:
    settings.KAFKA_EXTRA_CLUSTERS = (KafkaCluster("backup", kafka_bootstrap),)
    with clusters.using("backup"):
        GroupState.objects.create(group_id="billing", state="Stable", updated_at=timezone.now())
    made = send(analyst, "post", f"{API}?cluster=backup", NIGHTLY)
    assert made.status_code == 201, made.content
    path = f"{API}/{made.json()['id']}"
    analyst.get("/", {"cluster": clusters.default_name()})  # looking at the default one now
    changed = send(analyst, "patch", path, {"every_minutes": 30})
    assert changed.status_code == 200 and changed.json()["cluster"] == "backup"
    refused = send(analyst, "patch", path, {"cluster": "nope"})
    assert refused.status_code == 400 and refused.json()["error_code"] == "UNKNOWN_CLUSTER"
    moved = send(analyst, "patch", path, {"cluster": clusters.default_name()})
    assert moved.json()["cluster"] == clusters.default_name()
    assert list(AuditEntry.objects.filter(action__startswith="analysis.schedule")
                .order_by("id").values_list("cluster", flat=True)) == [
        "backup", "backup", clusters.default_name()]
