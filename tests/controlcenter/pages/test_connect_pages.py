"""The Kafka Connect pages through Django's test client against a real worker process on
the session broker: the plugin form from the worker's validation with its errors per
field, create, pause and resume, restart, delete (each audited), a failed task's stack
trace, offsets, throughput, the refusals for visitors without the permission, and a worker
that does not answer (a note on the page, never a 500); the live watch's pushes."""

from __future__ import annotations

import json
import queue
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from controlcenter import connectwatch
from controlcenter.access import Capability
from controlcenter.models import AuditEntry
from tests.connect.workers import WorkerProcess, wait_for
from tests.controlcenter.conftest import PASSWORD, make_user

DATAGEN = "io.confluent.kafka.connect.datagen.DatagenConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    group = f"connect-ui-{uuid.uuid4().hex[:8]}"
    proc = WorkerProcess(tmp_path_factory.mktemp("connect-ui"), kafka_bootstrap, group)
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def connect_url(worker: WorkerProcess, settings: Any) -> str:
    settings.MILLRACE_CONNECT_URL = worker.url
    return worker.url


@pytest.fixture
def operator_client(django_user_model: Any) -> Client:
    make_user("connect-operator", Capability.CHANGE_CONNECTORS)
    client = Client()
    assert client.login(username="connect-operator", password=PASSWORD)
    return client


def _state(worker: WorkerProcess, name: str) -> tuple[str, list[str]]:
    answer = worker.get(f"/connectors/{name}/status")
    if answer.status_code != 200:
        return "", []
    body = answer.json()
    return body["connector"]["state"], [t["state"] for t in body["tasks"]]


def _create_datagen(client: Client, name: str, topic: str) -> Any:
    return client.post("/connect/+create/", {
        "plugin": DATAGEN, "config.name": name, "config.kafka.topic": topic,
        "config.quickstart": "pageviews", "config.max.interval": "20",
        "config.tasks.max": "1"})


def test_the_plugin_form_is_the_workers_validation_with_errors_per_field(
        connect_url: str, operator_client: Client) -> None:
    listing = operator_client.get("/connect/+new/")
    assert listing.status_code == 200
    assert DATAGEN in listing.content.decode()

    form = operator_client.get("/connect/+new/", {"plugin": DATAGEN}).content.decode()
    assert 'name="config.kafka.topic"' in form and 'name="config.quickstart"' in form
    assert 'list="rec-quickstart"' in form  # the recommended values: users, pageviews, ...

    refused = operator_client.post("/connect/+create/", {
        "plugin": DATAGEN, "config.name": f"c-{uuid.uuid4().hex[:6]}",
        "config.quickstart": "nosuch", "config.tasks.max": "0"})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert "error(s) in this configuration" in page
    for field in ("quickstart", "tasks.max", "kafka.topic"):
        block = page.split(f'data-field="{field}"', 1)[1].split("</div>", 1)[0]
        assert 'class="errorlist"' in block, field


def test_create_pause_resume_restart_and_delete_are_audited_and_shown(
        connect_url: str, worker: WorkerProcess, operator_client: Client) -> None:
    name = f"c-{uuid.uuid4().hex[:6]}"
    created = _create_datagen(operator_client, name, f"pv-{name}")
    assert created.status_code == 302 and created["Location"] == f"/connect/{name}/"
    wait_for(lambda: _state(worker, name) == ("RUNNING", ["RUNNING"]), 30, "never ran")

    def counted() -> bool:
        page = operator_client.get(f"/connect/{name}/?fragment=1").content.decode()
        return "records/s" in page and "data-state=\"RUNNING\"" in page and \
            f"<td class=\"num\">{'—'}</td>" not in page
    wait_for(counted, 30, "the task's throughput never showed")
    listing = operator_client.get("/connect/").content.decode()
    assert f'data-connector="{name}"' in listing and DATAGEN in listing

    def offsets_shown() -> bool:  # datagen's offset partition, from the KIP-875 GET, once
        # the worker has committed its first source offsets
        return "task.id" in operator_client.get(f"/connect/{name}/").content.decode()
    wait_for(offsets_shown, 30, "the connector's offsets never showed")

    assert operator_client.post(f"/connect/{name}/pause/").status_code == 302
    wait_for(lambda: _state(worker, name) == ("PAUSED", ["PAUSED"]), 30, "never paused")
    assert 'data-state="PAUSED"' in operator_client.get(f"/connect/{name}/?fragment=1"
                                                        ).content.decode()
    operator_client.post(f"/connect/{name}/resume/")
    wait_for(lambda: _state(worker, name)[0] == "RUNNING", 30, "never resumed")
    operator_client.post(f"/connect/{name}/restart/")
    assert operator_client.post(f"/connect/{name}/delete/")["Location"] == "/connect/"
    wait_for(lambda: worker.get(f"/connectors/{name}").status_code == 404, 30, "not deleted")
    actions = list(AuditEntry.objects.filter(target=f"connector {name}")
                   .order_by("id").values_list("action", "result"))
    assert actions == [("connector.create", "ok"), ("connector.pause", "ok"),
                       ("connector.resume", "ok"), ("connector.restart", "ok"),
                       ("connector.delete", "ok")]
    assert operator_client.get(f"/connect/{name}/").status_code == 404


def test_a_failed_tasks_stack_trace_is_on_its_page(
        connect_url: str, worker: WorkerProcess, operator_client: Client,
        tmp_path: Path) -> None:
    name = f"c-{uuid.uuid4().hex[:6]}"
    source = tmp_path / "vanishing.txt"
    source.write_text("one\n")
    answer = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": SOURCE, "file": str(source), "topic": f"t-{name}"}})
    assert answer.status_code == 201
    wait_for(lambda: _state(worker, name)[1] == ["RUNNING"], 30, "never ran")
    source.unlink()
    wait_for(lambda: _state(worker, name)[1] == ["FAILED"], 30, "never failed")
    page = operator_client.get(f"/connect/{name}/").content.decode()
    assert "stack trace" in page and "Traceback" in page and "vanished" in page
    worker.request("DELETE", f"/connectors/{name}")


def test_changes_need_the_permission(connect_url: str, worker: WorkerProcess,
                                     django_user_model: Any) -> None:
    anonymous = Client()
    assert anonymous.get("/connect/").status_code == 200  # pages are public to read
    assert anonymous.post("/connect/any/pause/").status_code == 302  # to the login page
    viewer = Client()
    User.objects.create_user("connect-viewer", password=PASSWORD)
    viewer.login(username="connect-viewer", password=PASSWORD)
    assert viewer.post("/connect/any/pause/").status_code == 403
    assert viewer.post("/connect/+create/", {"plugin": DATAGEN}).status_code == 403


def test_an_unreachable_worker_is_a_note_not_an_error(settings: Any,
                                                       operator_client: Client) -> None:
    from brokercluster.ports import free_port

    settings.MILLRACE_CONNECT_URL = f"http://127.0.0.1:{free_port()}"
    for path in ("/connect/", "/connect/?fragment=1", "/connect/+new/",
                 f"/connect/+new/?plugin={DATAGEN}", "/connect/some-connector/"):
        answer = operator_client.get(path)
        assert answer.status_code == 200, path
        assert "Kafka Connect is not reachable" in answer.content.decode(), path
    refused = operator_client.post("/connect/+create/", {"plugin": DATAGEN,
                                                         "config.name": "x"})
    assert refused.status_code == 400 and "did not answer" in refused.content.decode()
    paused = operator_client.post("/connect/some-connector/pause/", follow=True)
    assert "did not answer" in paused.content.decode()


def test_the_watch_pushes_each_view_once_changed_and_stops_with_the_last_follower(
        connect_url: str, worker: WorkerProcess, operator_client: Client) -> None:
    name = f"c-{uuid.uuid4().hex[:6]}"
    assert _create_datagen(operator_client, name, f"pv-{name}").status_code == 302
    wait_for(lambda: _state(worker, name) == ("RUNNING", ["RUNNING"]), 30, "never ran")
    watch = connectwatch.ConnectWatch(period=0.2)
    lists, details = queue.Queue[str](), queue.Queue[str]()
    first = connectwatch.Follower(lists.put, "list")
    second = connectwatch.Follower(lists.put, "list")
    detail = connectwatch.Follower(details.put, f"connector:{name}")
    for follower in (first, second, detail):
        watch.join(follower)

    def next_state(pushes: queue.Queue[str], element: str) -> str:
        message = json.loads(pushes.get(timeout=20))
        assert message["type"] == "fragment" and message["id"] == element
        row = message["html"]
        if element == "connect-table":
            row = row.split(f'data-connector="{name}"', 1)[1]
        return str(re.findall(r'data-state="(\w+)"', row)[0])

    assert {next_state(lists, "connect-table") for _ in range(2)} == {"RUNNING"}
    assert next_state(details, "connector-status") == "RUNNING"
    operator_client.post(f"/connect/{name}/pause/")
    wait_for(lambda: next_state(lists, "connect-table") == "PAUSED", 30, "no PAUSED push")
    for follower in (first, second, detail):
        watch.leave(follower)
    thread = watch.thread
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive() and watch.thread is None
    worker.request("DELETE", f"/connectors/{name}")
