"""The Security pages through the Django test client, against a real secured broker
(SASL_SSL, StandardAuthorizer, the control center logged in as a super user): an ACL
previewed, created, listed, filtered and deleted, a SCRAM user created (it logs in with
confluent-kafka) and deleted (it no longer does); bad input gets form messages; anonymous
and non-staff users change nothing; every change is audited, never with a password."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from pytest_django.fixtures import Settings

from clusterclient import ClusterClient, ClusterRequestError
from clusterclient.login import kafka_login
from clusterclient.security import AclFilter, describe_acls
from controlcenter.models import AuditEntry
from tests.securebroker import SCRAM_USERS, SecuredBroker, start_secured_broker

pytestmark = pytest.mark.django_db
SUPER_USER, SUPER_PASSWORD = SCRAM_USERS["SCRAM-SHA-512"]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    broker = start_secured_broker(tmp_path_factory.mktemp("security-pages"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{SUPER_USER}",
    })
    yield broker
    broker.process.stop()


def login_config(broker: SecuredBroker, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password, "ssl.ca.location": broker.ca_file}


@pytest.fixture(autouse=True)
def _cluster(settings: Settings, secured: SecuredBroker, tmp_path: Path) -> None:
    config = login_config(secured, SUPER_USER, SUPER_PASSWORD)
    settings.KAFKA_BOOTSTRAP_SERVERS = config.pop("bootstrap.servers")
    settings.KAFKA_CLIENT_CONFIG = config
    settings.MILLRACE_CLUSTER_DIR = tmp_path


@pytest.fixture
def staff(client: Client) -> Client:
    client.force_login(User.objects.create_user("staffer", password="pw", is_staff=True))
    return client


def admin_client(broker: SecuredBroker) -> ClusterClient:
    config = login_config(broker, SUPER_USER, SUPER_PASSWORD)
    return ClusterClient(config.pop("bootstrap.servers"), config)


ACL = {"principal": "User:carol", "permission": "ALLOW", "operation": "READ",
       "resource_type": "TOPIC", "pattern_type": "PREFIXED", "resource_name": "orders-",
       "host": "*"}
CHANGES = [("/security/acls/+create/", ACL), ("/security/acls/+delete/", ACL),
           ("/security/users/+set/", {"username": "mallory", "mechanism": "SCRAM-SHA-512",
                                      "password": "pw", "iterations": "4096"}),
           ("/security/users/+delete/", {"username": SUPER_USER, "mechanism": "SCRAM-SHA-512"})]


@pytest.mark.parametrize(("url", "data"), CHANGES)
def test_anonymous_and_non_staff_users_change_nothing(client: Client, url: str,
                                                      data: dict[str, str]) -> None:
    response = client.post(url, data)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    operator = User.objects.create_user("operator", password="pw")
    operator.user_permissions.set(Permission.objects.filter(content_type__app_label="controlcenter"))
    client.force_login(operator)
    assert client.post(url, data).status_code == 403
    assert not AuditEntry.objects.exists()


def test_an_acl_is_previewed_created_filtered_and_deleted(staff: Client,
                                                          secured: SecuredBroker) -> None:
    preview = staff.get("/security/acls/+create/", {**ACL, "preview": "1"})
    assert preview.status_code == 200
    text = preview.content.decode()
    assert "User:carol may READ on every topic whose name starts with “orders-”" in text
    assert "Allowing READ also allows DESCRIBE." in text

    created = staff.post("/security/acls/+create/", ACL)
    assert created.status_code == 302 and created["Location"] == "/security/acls/"
    assert describe_acls(admin_client(secured), AclFilter(principal="User:carol"))[0].operation \
        == "READ"

    listed = staff.get("/security/acls/", {"principal": "carol"}).content.decode()
    assert 'data-principal="User:carol" data-resource="orders-"' in listed
    other = staff.get("/security/acls/", {"principal": "carol", "type": "GROUP"})
    assert 'data-principal="User:carol"' not in other.content.decode()

    assert staff.post("/security/acls/+delete/", ACL).status_code == 302
    assert describe_acls(admin_client(secured), AclFilter(principal="User:carol")) == []
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "result", "target"))
    assert entries == [("acl.create", "ok", "acl TOPIC PREFIXED orders-"),
                       ("acl.delete", "ok", "acl TOPIC PREFIXED orders-")]


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"principal": "carol"}, "principal", "A principal is User:&lt;name&gt;"),
    ({"resource_name": "no spaces!"}, "resource_name", "is not a topic name"),
    ({"resource_name": "*"}, "resource_name", "is a LITERAL name"),
    ({"resource_type": "CLUSTER", "pattern_type": "LITERAL", "operation": "ALTER",
      "resource_name": "my-cluster"}, "resource_name", "LITERAL name kafka-cluster"),
    ({"resource_type": "GROUP", "operation": "WRITE"}, "operation",
     "WRITE does not apply to a GROUP"),
    ({"pattern_type": "MATCH"}, "pattern_type", "Select a valid choice"),
])
def test_bad_acl_input_gets_a_form_message(staff: Client, secured: SecuredBroker,
                                           change: dict[str, str], field: str,
                                           words: str) -> None:
    for answer in (staff.get("/security/acls/+create/", {**ACL, **change, "preview": "1"}),
                   staff.post("/security/acls/+create/", {**ACL, **change})):
        assert answer.status_code == 400
        assert words in answer.content.decode()
    assert describe_acls(admin_client(secured)) == []
    assert not AuditEntry.objects.exists()


def can_log_in(broker: SecuredBroker, user: str, password: str) -> bool:
    config = login_config(broker, user, password)
    return kafka_login(config, user, password, timeout_s=20)


def test_a_scram_user_is_created_logs_in_and_is_deleted(staff: Client,
                                                       secured: SecuredBroker) -> None:
    form = {"username": "carol", "mechanism": "SCRAM-SHA-512", "password": "carol-secret",
            "iterations": "8192"}
    assert staff.post("/security/users/+set/", form).status_code == 302
    assert can_log_in(secured, "carol", "carol-secret")
    listed = staff.get("/security/users/").content.decode()
    assert 'data-user="carol" data-mechanism="SCRAM-SHA-512"' in listed
    assert "<td>8192</td>" in listed

    assert staff.post("/security/users/+delete/", {"username": "carol",
                                                  "mechanism": "SCRAM-SHA-512"}).status_code == 302
    assert not can_log_in(secured, "carol", "carol-secret")
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "parameters"))
    assert entries == [("scram.upsert", {"mechanism": "SCRAM-SHA-512", "iterations": 8192}),
                       ("scram.delete", {"mechanism": "SCRAM-SHA-512"})]


@pytest.mark.parametrize(("change", "words"), [
    ({"iterations": "100"}, "greater than or equal to 4096"),
    ({"iterations": "20000"}, "less than or equal to 16384"),
    ({"username": "two words"}, "no spaces or control characters"),
    ({"mechanism": "SCRAM-SHA-1"}, "Select a valid choice"),
])
def test_bad_scram_input_gets_a_form_message(staff: Client, change: dict[str, str],
                                             words: str) -> None:
    form = {"username": "dave", "mechanism": "SCRAM-SHA-256", "password": "pw",
            "iterations": "4096", **change}
    answer = staff.post("/security/users/+set/", form)
    assert answer.status_code == 400 and words in answer.content.decode()
    assert not AuditEntry.objects.exists()


def test_deleting_a_missing_credential_shows_the_brokers_refusal(staff: Client) -> None:
    answer = staff.post("/security/users/+delete/", {"username": "nobody",
                                                    "mechanism": "SCRAM-SHA-256"}, follow=True)
    assert "RESOURCE_NOT_FOUND" in answer.content.decode()
    assert AuditEntry.objects.get().result == "error"


NO_AUTHORIZER = "Authorization is not enabled on this cluster"


def test_a_cluster_without_an_authorizer_says_so_not_no_acls(
        staff: Client, settings: Settings, kafka_bootstrap: str) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap  # the default unsecured test broker
    settings.KAFKA_CLIENT_CONFIG = {}
    # librdkafka hands back DescribeAcls' SECURITY_DISABLED as an empty list; the page
    # does not take that for "No ACLs."
    listed = staff.get("/security/acls/")
    text = listed.content.decode()
    assert listed.status_code == 200
    assert NO_AUTHORIZER in text and "not enforced" in text and "No ACLs." not in text
    assert "SECURITY_DISABLED" in text
    # the note alone: no Create button, no empty table to filter
    for offered in ('id="acl-create-link"', 'id="acl-table"', 'id="acl-filter"'):
        assert offered not in text, offered
    with pytest.raises(ClusterRequestError) as refused:
        describe_acls(ClusterClient(kafka_bootstrap, {}))
    assert refused.value.code_name == "SECURITY_DISABLED"
    # The create page says so instead of offering its form.
    form = staff.get("/security/acls/+create/", {**ACL, "preview": "1"})
    text = form.content.decode()
    assert form.status_code == 200 and NO_AUTHORIZER in text
    assert 'id="acl-form"' not in text and 'id="acl-create-form"' not in text
    # A POST anyway gets the same as a form message, not the broker's bare error or a 500.
    answer = staff.post("/security/acls/+create/", ACL)
    text = answer.content.decode()
    assert answer.status_code == 400 and NO_AUTHORIZER in text and "cannot be created" in text
    assert 'id="acl-form"' not in text
    assert AuditEntry.objects.get().result == "error"  # the attempt is audited


def test_a_secured_cluster_without_acls_lists_none(staff: Client) -> None:
    text = staff.get("/security/acls/", {"principal": "nobody-has-acls"}).content.decode()
    assert NO_AUTHORIZER not in text and "No ACL matches." in text
    assert 'id="acl-create-link"' in text and 'id="acl-table"' in text  # what the above lack


@pytest.mark.parametrize("service", ["millrace", SUPER_USER])
def test_the_platforms_service_principals_keep_their_credentials(
        staff: Client, settings: Settings, secured: SecuredBroker, service: str) -> None:
    settings.MILLRACE_SERVICE_PRINCIPALS = ("broker", "millrace")  # as platform --secure
    # SUPER_USER is the control center's own login (KAFKA_CLIENT_CONFIG): protected too.
    form = {"username": service, "mechanism": "SCRAM-SHA-512", "password": "taken-over",
            "iterations": "4096"}
    answer = staff.post("/security/users/+set/", form)
    text = answer.content.decode()
    assert answer.status_code == 400
    assert f"{service} is one of the platform&#x27;s own service principals" in text
    assert "would lock them out" in text
    deleted = staff.post("/security/users/+delete/", {"username": service,
                                                     "mechanism": "SCRAM-SHA-512"},
                         follow=True).content.decode()
    assert f"Not deleted: {service} is one of the platform&#x27;s own service" in deleted
    assert not AuditEntry.objects.exists()
    assert can_log_in(secured, SUPER_USER, SUPER_PASSWORD)
    listed = staff.get("/security/users/").content.decode()
    row = listed.split(f'data-user="{SUPER_USER}"')[1].split("</tr>")[0]
    assert "service principal" in row and "scram-delete" not in row
