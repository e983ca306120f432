"""The cluster pages' JSON API under /api/v1/: the same data as the pages, the same actions,
JSON errors in the broker's words, and refusals without a 500."""

from __future__ import annotations

import base64

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

from clusterclient import ClusterClient
from controlcenter.models import AuditEntry
from tests.compat.clients import new_topic
from tests.controlcenter.cluster_snapshot import seed

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cluster(settings: Settings, kafka_bootstrap: str, tmp_path: object) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap
    settings.MILLRACE_CLUSTER_DIR = tmp_path


@pytest.fixture
def admin(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("api", password="pw"))
    return client


def test_reads_serve_the_collectors_tables(client: Client) -> None:
    assert client.get("/api/v1/cluster").json()["error_code"] == "NO_SNAPSHOT"
    seed({f"t{i:02}": 2 for i in range(60)} | {"__internal": 1})
    assert client.get("/api/v1/cluster").json()["preferred_leader_ratio"] == 0.5
    brokers = client.get("/api/v1/brokers").json()
    assert [(b["node_id"], b["status"]) for b in brokers] == [(1, "up"), (2, "up"), (3, "down")]
    page = client.get("/api/v1/topics").json()
    assert page["count"] == 60 and len(page["results"]) == 50 and page["next"]
    assert client.get("/api/v1/topics", {"q": "t5"}).json()["count"] == 10
    assert client.get("/api/v1/topics", {"q": "internal"}).json()["count"] == 1
    detail = client.get("/api/v1/topics/t01").json()
    assert [p["isr"] for p in detail["partitions"]] == [[1, 2], [1, 2, 3]]
    assert client.get("/api/v1/topics/none").status_code == 404
    assert client.get("/api/v1/brokers/3").json()["configs_error"].startswith("Broker 3 is down")


def test_anonymous_and_unprivileged_writes_are_refused(client: Client) -> None:
    writes = [("post", "/api/v1/topics", {"name": "x"}), ("delete", "/api/v1/topics/x", {}),
              ("post", "/api/v1/topics/x/configs", {"name": "retention.ms", "value": "1"}),
              ("post", "/api/v1/topics/x/messages", {"value": "v"}),
              ("post", "/api/v1/brokers/1/kill", {}),
              ("post", "/api/v1/brokers/elect-leaders", {}),
              ("post", "/api/v1/topics/x/elect-leaders", {})]
    for method, url, body in writes:
        response = getattr(client, method)(url, body, content_type="application/json")
        assert response.status_code in (401, 403), (url, response.status_code)
    client.force_login(User.objects.create_user("reader", password="pw"))
    for method, url, body in writes:
        response = getattr(client, method)(url, body, content_type="application/json")
        assert response.status_code == 403, url
    assert not AuditEntry.objects.exists()


def test_a_topic_lives_and_dies_through_the_api(admin: Client, kafka_bootstrap: str) -> None:
    name = new_topic("api")
    created = admin.post("/api/v1/topics", {"name": name, "partitions": 2,
                                            "configs": {"retention.ms": "60000"}},
                         content_type="application/json")
    assert created.status_code == 201 and created.json()["warnings"] == []
    configs = {c["name"]: c for c in admin.get(f"/api/v1/topics/{name}/configs").json()}
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    bad = admin.post(f"/api/v1/topics/{name}/configs", {"name": "retention.ms",
                                                        "value": "never"},
                     content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error_code"] == "INVALID_CONFIG"
    reset = admin.post(f"/api/v1/topics/{name}/configs", {"name": "retention.ms"},
                       content_type="application/json")
    assert reset.status_code == 204

    produced = admin.post(f"/api/v1/topics/{name}/messages",
                          {"key": "k", "value": base64.b64encode(b"\x00\xffraw").decode(),
                           "encoding": "base64", "headers": {"h": "v"}, "partition": 1},
                          content_type="application/json").json()
    assert produced == {"partition": 1, "offset": 0}
    page = admin.get(f"/api/v1/topics/{name}/messages", {"header": "h=v"}).json()
    assert page["messages"][0]["value"]["base64"] == base64.b64encode(b"\x00\xffraw").decode()
    assert page["positions"] == "0:0,1:1"

    assert admin.post(f"/api/v1/topics/{name}/elect-leaders").json() == {"not_moved": 0}
    assert admin.delete(f"/api/v1/topics/{name}").status_code == 204
    assert name not in ClusterClient(kafka_bootstrap).metadata(refresh=True).topics
    again = admin.delete(f"/api/v1/topics/{name}")
    assert again.json()["error_code"] == "UNKNOWN_TOPIC_OR_PART"


def test_a_topic_no_acks_all_write_can_reach_is_created_with_a_warning(admin: Client) -> None:
    name = new_topic("api-short")
    created = admin.post("/api/v1/topics", {"name": name, "replication_factor": 1,
                                            "configs": {"min.insync.replicas": "2"}},
                         content_type="application/json")
    assert created.status_code == 201  # as Kafka: accepted
    (warning,) = created.json()["warnings"]
    assert "replication factor 1, below its min.insync.replicas (2)" in warning
    assert "acks=all" in warning and "NOT_ENOUGH_REPLICAS" in warning
    entry = AuditEntry.objects.get(action="topic.create", target=f"topic {name}")
    assert "warned" in entry.message


def test_bad_requests_get_json_errors(admin: Client) -> None:
    assert admin.post("/api/v1/topics", {"partitions": 0},
                      content_type="application/json").json()["error_code"] == "INVALID_REQUEST"
    illegal = admin.post("/api/v1/topics", {"name": "a b"}, content_type="application/json")
    assert illegal.status_code == 400 and "is illegal" in illegal.json()["message"]
    kill = admin.post("/api/v1/brokers/1/kill")
    assert kill.status_code == 503 and kill.json()["error_code"] == "NO_SUPERVISOR"
    assert admin.post("/api/v1/brokers/1/explode").status_code == 404
    missing = admin.get("/api/v1/topics/no-such/messages")
    assert missing.status_code == 400
    assert missing.json()["error_code"] == "UNKNOWN_TOPIC_OR_PART"


def test_the_openapi_document_describes_the_cluster_api(client: Client) -> None:
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    for route in ("/api/v1/cluster", "/api/v1/brokers/{node_id}/{command}", "/api/v1/topics",
                  "/api/v1/topics/{name}/configs", "/api/v1/topics/{name}/messages"):
        assert route in schema["paths"], route
