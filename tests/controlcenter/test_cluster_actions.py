"""State changes of the cluster pages against a real broker: create, configure and delete a
topic, produce and browse messages, and operate brokers; each audited, each refused to
anonymous users and to users without the permission."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from pytest_django.fixtures import Settings

from clusterclient import ClusterClient, ClusterRequestError
from controlcenter.models import AuditEntry
from registry.actions import SchemaRequest, register_schema
from tests.compat.clients import new_topic

pytestmark = pytest.mark.django_db

STATE_CHANGES = [
    ("/topics/+create/", {"name": "refused-topic", "partitions": "1"}),
    ("/topics/orders/delete/", {"confirm": "orders"}),
    ("/topics/orders/config/", {"name": "retention.ms", "value": "1000", "op": "set"}),
    ("/topics/orders/produce/", {"produce-value": "x"}),
    ("/brokers/1/kill/", {}),
    ("/brokers/1/restart/", {}),
    ("/brokers/elect-leaders/", {}),
    ("/topics/orders/elect-leaders/", {}),
]


@pytest.fixture(autouse=True)
def _cluster(settings: Settings, kafka_bootstrap: str, tmp_path: object) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap
    settings.MILLRACE_CLUSTER_DIR = tmp_path  # no supervisor there


@pytest.fixture
def admin(client: Client) -> Client:
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


@pytest.mark.parametrize(("url", "data"), STATE_CHANGES)
def test_an_anonymous_user_is_sent_to_sign_in_and_nothing_changes(
        client: Client, url: str, data: dict[str, str]) -> None:
    response = client.post(url, data)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(("url", "data"), STATE_CHANGES)
def test_a_user_without_the_permission_is_refused(client: Client, url: str,
                                                  data: dict[str, str]) -> None:
    client.force_login(User.objects.create_user("viewer", password="pw"))
    assert client.post(url, data).status_code == 403
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(("url", "data"), STATE_CHANGES)
def test_no_state_change_over_get(admin: Client, url: str, data: dict[str, str]) -> None:
    if url == "/topics/+create/":
        assert admin.get(url).status_code == 200  # the form
        return
    assert admin.get(url, data).status_code == 405


def test_a_topic_is_created_configured_and_deleted(admin: Client, kafka_bootstrap: str) -> None:
    name = new_topic("page")
    created = admin.post("/topics/+create/", {"name": name, "partitions": "2",
                                              "replication_factor": "1",
                                              "configs": "retention.ms=3600000"})
    assert created.status_code == 302
    cluster = ClusterClient(kafka_bootstrap)
    assert len(cluster.topic(name).partitions) == 2
    configs = {c.name: c for c in cluster.topic_configs(name)}
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"

    admin.post(f"/topics/{name}/config/", {"name": "retention.ms", "value": "7200000",
                                           "op": "set"})
    assert {c.name: c.value for c in cluster.topic_configs(name)}["retention.ms"] == "7200000"
    admin.post(f"/topics/{name}/config/", {"name": "retention.ms", "op": "reset"})
    reset = {c.name: c for c in cluster.topic_configs(name)}["retention.ms"]
    assert reset.source != "DYNAMIC_TOPIC_CONFIG"

    refused = admin.post(f"/topics/{name}/delete/", {"confirm": "wrong"}, follow=True)
    assert "to confirm the deletion" in refused.content.decode()
    assert admin.post(f"/topics/{name}/delete/", {"confirm": name}).status_code == 302
    with pytest.raises(ClusterRequestError) as gone:
        ClusterClient(kafka_bootstrap).topic(name)
    assert gone.value.code_name == "UNKNOWN_TOPIC_OR_PART"
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "result",
                                                                  "username"))
    assert actions == [("topic.create", "ok", "root"), ("topic.config.set", "ok", "root"),
                       ("topic.config.reset", "ok", "root"), ("topic.delete", "ok", "root")]


def test_bad_input_gets_the_brokers_own_words(admin: Client) -> None:
    bad_name = admin.post("/topics/+create/", {"name": "no spaces allowed", "partitions": "1"})
    assert bad_name.status_code == 400
    # librdkafka names Kafka's INVALID_TOPIC_EXCEPTION (17) TOPIC_EXCEPTION.
    assert "TOPIC_EXCEPTION: Topic name &#x27;no spaces allowed&#x27; is illegal" in \
        bad_name.content.decode()
    name = new_topic("bad")
    admin.post("/topics/+create/", {"name": name, "partitions": "1"})
    bad_config = admin.post("/topics/+create/", {"name": new_topic("x"), "partitions": "1",
                                                 "configs": "cleanup.policy=sometimes"})
    assert "INVALID_CONFIG" in bad_config.content.decode()
    bad_value = admin.post(f"/topics/{name}/config/",
                           {"name": "retention.ms", "value": "soon", "op": "set"}, follow=True)
    assert "INVALID_CONFIG" in bad_value.content.decode()
    malformed = admin.post("/topics/+create/", {"name": "x", "configs": "no equals sign"})
    assert "is not name=value" in malformed.content.decode()
    errors = AuditEntry.objects.filter(result="error").values_list("message", flat=True)
    assert any("TOPIC_EXCEPTION" in m for m in errors)


def test_a_message_is_produced_and_found_with_a_filter(admin: Client) -> None:
    name = new_topic("produce")
    admin.post("/topics/+create/", {"name": name, "partitions": "2"})
    for i, item in enumerate(["tea", "coffee", "green tea"]):
        response = admin.post(f"/topics/{name}/produce/", {
            "produce-key": f"user-{i}", "produce-value": json.dumps({"item": item}),
            "produce-partition": str(i % 2), "produce-headers": f"source=page\nn={i}"})
        assert response.status_code == 302, response.content.decode()[:2000]
    page = admin.get(f"/topics/{name}/messages/", {"value": "tea", "start": "oldest"})
    html = page.content.decode()
    assert html.count('class="message-row') == 2 and "coffee" not in html
    assert "&quot;item&quot;: &quot;green tea&quot;" in html  # JSON pretty-printed
    csv = admin.get(f"/topics/{name}/messages/", {"header": "n=1", "download": "csv"})
    assert csv["Content-Type"].startswith("text/csv") and "coffee" in csv.content.decode()
    downloaded = json.loads(admin.get(f"/topics/{name}/messages/",
                                      {"download": "json"}).content)
    assert {m["key"]["text"] for m in downloaded} == {"user-0", "user-1", "user-2"}
    produced = AuditEntry.objects.filter(action="topic.produce")
    assert produced.count() == 3 and all(e.parameters["headers"] == ["source", "n"]
                                         for e in produced)


def test_avro_is_produced_with_a_subject_and_decoded(admin: Client) -> None:
    register_schema("page-avro-value", SchemaRequest(json.dumps({
        "type": "record", "name": "Tea", "fields": [{"name": "kind", "type": "string"}]})),
        normalize=False)
    name = new_topic("avro")
    admin.post("/topics/+create/", {"name": name, "partitions": "1"})
    refused = admin.post(f"/topics/{name}/produce/", {"produce-value": '{"kind": 1}',
                                                      "produce-subject": "page-avro-value"})
    assert refused.status_code == 400 and "does not match" in refused.content.decode()
    admin.post(f"/topics/{name}/produce/", {"produce-value": '{"kind": "oolong"}',
                                            "produce-subject": "page-avro-value"})
    html = admin.get(f"/topics/{name}/messages/").content.decode()
    assert "avro · schema" in html and "oolong" in html


def test_browsing_bad_input_and_missing_topics_are_messages_not_500s(admin: Client) -> None:
    missing = admin.get("/topics/no-such-topic/messages/")
    assert missing.status_code == 200 and "UNKNOWN_TOPIC_OR_PART" in missing.content.decode()
    bad = admin.get("/topics/x/messages/", {"start": "offset"})
    assert "Give the offset" in bad.content.decode()


def test_operating_brokers_without_a_supervisor_says_so(admin: Client) -> None:
    response = admin.post("/brokers/2/kill/", {"next": "/brokers/"}, follow=True)
    assert "No cluster supervisor answers" in response.content.decode()
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.result, entry.target) == ("broker.kill", "error", "broker 2")
    assert admin.post("/brokers/2/explode/").status_code == 404
    elsewhere = admin.post("/brokers/2/kill/", {"next": "https://example.com/"})
    assert elsewhere["Location"] == "/brokers/"  # never a redirect off the site


def test_a_user_with_the_permission_may_produce(client: Client) -> None:
    user = User.objects.create_user("producer", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="produce_messages"))
    client.force_login(user)
    name = new_topic("perm")
    ClusterClient(client_bootstrap()).create_topic(name, 1, 1)
    assert client.post(f"/topics/{name}/produce/", {"produce-value": "hi"}).status_code == 302
    assert client.post("/topics/+create/", {"name": new_topic("no")}).status_code == 403


def client_bootstrap() -> str:
    from django.conf import settings

    return str(settings.KAFKA_BOOTSTRAP_SERVERS)


def test_preferred_leaders_are_elected_for_a_topic_and_the_cluster(admin: Client) -> None:
    name = new_topic("elect")
    admin.post("/topics/+create/", {"name": name, "partitions": "2"})
    done = admin.post(f"/topics/{name}/elect-leaders/", {"next": "/brokers/"}, follow=True)
    assert "Preferred leaders elected on topic" in done.content.decode()
    everywhere = admin.post("/brokers/elect-leaders/", follow=True)
    assert "Preferred leaders elected on every topic" in everywhere.content.decode()
    entries = AuditEntry.objects.filter(action="partitions.elect_preferred")
    assert [e.result for e in entries] == ["ok", "ok"]
    assert entries.filter(target=f"topic {name}", message="2 of 2 led by their "
                                                          "preferred replica").exists()
    missing = admin.post("/topics/no-such-topic/elect-leaders/", follow=True)
    assert "UNKNOWN_TOPIC_OR_PART" in missing.content.decode()
