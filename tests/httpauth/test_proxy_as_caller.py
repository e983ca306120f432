"""The REST proxy talks to Kafka as its caller (httpauth/README.md, "Principal
propagation"): against a broker with StandardAuthorizer, a SCRAM user's REST produce is
allowed or refused by that user's ACLs, and a refusal is Confluent's 403 40301 at once,
never a timeout. The proxy's own identity (PLAINTEXT, a super user here) would be allowed
everything, so every refusal below is the caller's. The same holds on another configured
cluster (a v3 path's): a second secured broker, where the proxy's own login is a super user."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from django.conf import settings
from django.test import override_settings

import httpauth
from clusterclient.clusters import KafkaCluster
from millrace.asgi import application
from restproxy import client as proxy_client
from restproxy.instances.manager import manager
from tests.securebroker import SCRAM_USERS, start_secured_broker

USER, PASSWORD = SCRAM_USERS["SCRAM-SHA-512"]
OTHER, OTHER_PASSWORD = "bob", "bob-secret"  # a second SCRAM-SHA-512 user, no ACLs
PROXY = "/" + settings.RESTPROXY_PREFIX.rstrip("/")
BINARY = "application/vnd.kafka.binary.v2+json"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    secured = start_secured_broker(tmp_path_factory.mktemp("caller"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener sets things up
    })
    admin = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in
                                       ("granted", "read-only", "hidden")]).values():
        future.result(15)
    user = f"User:{USER}"
    acls = [AclBinding(ResourceType.TOPIC, "granted", ResourcePatternType.LITERAL, user, "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "granted", ResourcePatternType.LITERAL, user, "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "rest-", ResourcePatternType.PREFIXED, user, "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "read-only", ResourcePatternType.LITERAL, user,
                       "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
    for future in admin.create_acls(acls).values():
        future.result(15)
    bob = UserScramCredentialUpsertion(
        OTHER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), OTHER_PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([bob]).values():
        future.result(15)
    try:
        yield secured
    finally:
        proxy_client.reset_gateway()
        secured.process.stop()


@pytest.fixture(scope="module")
def other(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A second secured cluster: the caller may write `granted` and only describe
    `read-only`; the proxy logs in there as `admin` (PLAIN), a super user."""
    secured = start_secured_broker(tmp_path_factory.mktemp("caller-other"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
    })
    admin = AdminClient({"bootstrap.servers": secured.bootstrap("PLAINTEXT")})
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in
                                       ("granted", "read-only", "hidden")]).values():
        future.result(15)
    user = f"User:{USER}"
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, user, "*",
                       operation, AclPermissionType.ALLOW)
            for topic, operation in (("granted", AclOperation.WRITE),
                                     ("read-only", AclOperation.DESCRIBE))]
    for future in admin.create_acls(acls).values():
        future.result(15)
    bob = UserScramCredentialUpsertion(
        OTHER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), OTHER_PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([bob]).values():
        future.result(15)
    try:
        yield secured
    finally:
        proxy_client.reset_gateway()
        secured.process.stop()


@pytest.fixture
def auth_on(broker: Any, transactional_db: None) -> Iterator[None]:
    with override_settings(
            MILLRACE_HTTP_AUTH=True,
            KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap("PLAINTEXT"),
            MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS=broker.bootstrap("SASL_PLAINTEXT"),
            MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL="SASL_PLAINTEXT",
            MILLRACE_HTTP_AUTH_SASL_MECHANISM="SCRAM-SHA-512"):
        proxy_client.reset_gateway()
        yield
        proxy_client.reset_gateway()


def asgi(method: str, path: str, body: Any = None, user: str = USER,
         content_type: str = BINARY) -> httpx.Response:
    password = OTHER_PASSWORD if user == OTHER else PASSWORD
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                     timeout=60) as c:
            return await c.request(method, PROXY + path,
                                   content=json.dumps(body) if body is not None else None,
                                   headers={"Authorization": basic(user, password),
                                            "Content-Type": content_type,
                                            "Accept": "application/vnd.kafka.binary.v2+json"})

    return async_to_sync(send)()


RECORDS = {"records": [{"value": base64.b64encode(b"hello").decode()}]}


def test_the_caller_s_acls_decide_a_produce(auth_on: None) -> None:
    granted = asgi("POST", "/topics/granted", RECORDS)
    assert granted.status_code == 200, granted.content
    assert granted.json()["offsets"][0]["offset"] == 0
    refused = asgi("POST", "/topics/read-only", RECORDS)
    assert refused.status_code == 403, refused.content
    assert refused.json()["error_code"] == 40301
    hidden = asgi("POST", "/topics/hidden", RECORDS)  # not even DESCRIBE: not hidden as 404
    assert (hidden.status_code, hidden.json()["error_code"]) == (403, 40301), hidden.content
    # v3 as well
    v3 = asgi("GET", "/v3/clusters")
    cluster_id = v3.json()["data"][0]["cluster_id"]
    record = {"value": {"type": "BINARY", "data": base64.b64encode(b"x").decode()}}
    ok = asgi("POST", f"/v3/clusters/{cluster_id}/topics/granted/records", record)
    assert ok.status_code == 200 and ok.json()["error_code"] == 200, ok.content
    no = asgi("POST", f"/v3/clusters/{cluster_id}/topics/read-only/records", record)
    # v3 answers an ACL's refusal as v2 does: 403 with Confluent's 40301
    assert (no.status_code, no.json()["error_code"]) == (403, 40301), no.content
    assert "authorization failed" in no.json()["message"]
    unseen = asgi("POST", f"/v3/clusters/{cluster_id}/topics/hidden/records", record)
    assert (unseen.status_code, unseen.json()["error_code"]) == (403, 40301), unseen.content


def test_the_caller_sees_only_the_topics_it_may_describe(auth_on: None) -> None:
    topics = asgi("GET", "/topics")
    assert topics.status_code == 200, topics.content
    assert sorted(topics.json()) == ["granted", "read-only"]
    assert proxy_client.principal_clients.get(httpauth.Principal(USER, PASSWORD)) is not None


def test_callers_clients_are_pooled_and_expire(auth_on: None) -> None:
    assert asgi("POST", "/topics/granted", RECORDS).status_code == 200
    assert len(proxy_client.principal_clients) == 1
    assert asgi("POST", "/topics/granted", RECORDS).status_code == 200
    assert len(proxy_client.principal_clients) == 1  # the same user's clients, reused
    proxy_client.principal_clients.expire(idle_s=-1)
    assert len(proxy_client.principal_clients) == 0
    assert asgi("POST", "/topics/granted", RECORDS).status_code == 200


V2 = "application/vnd.kafka.v2+json"


def fetch(instance: str, user: str = USER) -> httpx.Response:
    """Records of the instance, polled until some come or an error does."""
    deadline = time.monotonic() + 60  # a loaded machine's group join took over 30 s
    while True:
        response = asgi("GET", f"{instance}/records?timeout=500", user=user)
        if response.status_code != 200 or response.json() or time.monotonic() > deadline:
            return response


def test_consumer_instances_consume_as_their_creator(auth_on: None) -> None:
    assert asgi("POST", "/topics/granted", RECORDS).status_code == 200
    created = asgi("POST", "/consumers/rest-g1", {"format": "binary",
                                                  "auto.offset.reset": "earliest"},
                   content_type=V2)
    assert created.status_code == 200, created.content
    instance = f"/consumers/rest-g1/instances/{created.json()['instance_id']}"
    assert asgi("POST", f"{instance}/subscription", {"topics": ["granted"]},
                content_type=V2).status_code == 204
    records = fetch(instance)
    assert records.status_code == 200 and records.json(), records.content
    # another user of the cluster does not see this user's instance
    other = asgi("GET", f"{instance}/records", user=OTHER)
    assert other.status_code == 404 and other.json()["error_code"] == 40403
    assert asgi("DELETE", instance, user=OTHER, content_type=V2).status_code == 404
    assert asgi("DELETE", instance, content_type=V2).status_code == 204


def test_a_consumer_without_read_is_refused_not_left_waiting(auth_on: None) -> None:
    created = asgi("POST", "/consumers/rest-g2", {"format": "binary",
                                                  "auto.offset.reset": "earliest"},
                   content_type=V2)
    instance = f"/consumers/rest-g2/instances/{created.json()['instance_id']}"
    assert asgi("POST", f"{instance}/subscription", {"topics": ["read-only"]},
                content_type=V2).status_code == 204
    refused = fetch(instance)
    assert refused.status_code == 403, refused.content
    assert refused.json()["error_code"] == 40301
    asgi("DELETE", instance, content_type=V2)


def test_a_refusal_read_between_fetches_is_answered_by_the_next_one(auth_on: None) -> None:
    """The instance's thread keeps polling while no fetch waits: the refusal it reads then
    (librdkafka reports it once) is the next fetch's 403, not dropped for empty answers."""
    created = asgi("POST", "/consumers/rest-g3", {"format": "binary",
                                                  "auto.offset.reset": "earliest"},
                   content_type=V2)
    name = created.json()["instance_id"]
    instance = f"/consumers/rest-g3/instances/{name}"
    assert asgi("POST", f"{instance}/subscription", {"topics": ["read-only"]},
                content_type=V2).status_code == 204
    polled = manager()._instances[("rest-g3", name)]
    deadline = time.monotonic() + 60
    while getattr(polled, "deferred", None) is None and time.monotonic() < deadline:
        time.sleep(0.1)  # no fetch meanwhile: only the idle poll reads the refusal
    refused = asgi("GET", f"{instance}/records?timeout=500")
    assert refused.status_code == 403, refused.content
    assert refused.json()["error_code"] == 40301
    asgi("DELETE", instance, content_type=V2)


def test_another_cluster_is_reached_as_the_caller_too(auth_on: None, other: Any) -> None:
    """The other cluster's config holds the proxy's own login (a super user there): the
    caller's login replaces it, so that cluster's ACLs decide for the caller."""
    service = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
               "sasl.username": "admin", "sasl.password": "admin-secret"}
    clusters = (KafkaCluster("other", other.bootstrap("SASL_PLAINTEXT"), service),)
    with override_settings(KAFKA_EXTRA_CLUSTERS=clusters):
        proxy_client.reset_gateway()
        listed = asgi("GET", "/v3/clusters")
        assert listed.status_code == 200, listed.content
        ids = [c["cluster_id"] for c in listed.json()["data"]]
        assert len(ids) == 2 and ids[0] != ids[1], ids
        base = f"/v3/clusters/{ids[1]}/topics"
        record = {"value": {"type": "BINARY", "data": base64.b64encode(b"x").decode()}}
        ok = asgi("POST", f"{base}/granted/records", record)
        assert ok.status_code == 200 and ok.json()["cluster_id"] == ids[1], ok.content
        no = asgi("POST", f"{base}/read-only/records", record)
        assert (no.status_code, no.json()["error_code"]) == (403, 40301), no.content
        topics = asgi("GET", base)
        assert topics.status_code == 200, topics.content
        assert sorted(t["topic_name"] for t in topics.json()["data"]) == ["granted", "read-only"]
        # a user with no ACLs there is refused what the proxy itself may do
        bob = asgi("POST", f"{base}/granted/records", record, user=OTHER)
        assert (bob.status_code, bob.json()["error_code"]) == (403, 40301), bob.content
        proxy_client.reset_gateway()
