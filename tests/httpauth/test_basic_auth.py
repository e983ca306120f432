"""HTTP Basic on the registry and the REST proxy (httpauth/README.md), with the users of a
real broker running SASL: the SCRAM users it was started with (`--add-scram`) log in, and
nobody else. Each request goes through the Django test client (MIDDLEWARE) and through the
platform's ASGI application in-process (API_MIDDLEWARE and the fast lanes)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import Client, override_settings

import httpauth
from millrace.asgi import application
from restproxy import client as proxy_client
from tests.securebroker import SCRAM_USERS, start_secured_broker

USER, PASSWORD = SCRAM_USERS["SCRAM-SHA-512"]
REGISTRY = "/" + settings.REGISTRY_PREFIX.rstrip("/")
PROXY = "/" + settings.RESTPROXY_PREFIX.rstrip("/")
V1 = "application/vnd.schemaregistry.v1+json"
SCHEMA = json.dumps({"type": "record", "name": "User",
                     "fields": [{"name": "name", "type": "string"}]})


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    secured = start_secured_broker(tmp_path_factory.mktemp("httpauth"))
    try:
        yield secured
    finally:
        proxy_client.reset_gateway()  # its producer was pointed at this broker
        secured.process.stop()


@pytest.fixture
def auth_on(broker: Any, transactional_db: None) -> Iterator[None]:
    with override_settings(
            MILLRACE_HTTP_AUTH=True,
            KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap("PLAINTEXT"),
            MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS=broker.bootstrap("SASL_PLAINTEXT"),
            MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL="SASL_PLAINTEXT",
            MILLRACE_HTTP_AUTH_SASL_MECHANISM="SCRAM-SHA-512",
            MILLRACE_HTTP_AUTH_TIMEOUT_S=10.0):
        httpauth.verified.clear()
        yield
        httpauth.verified.clear()


def asgi(method: str, path: str, body: str | None = None,
         headers: dict[str, str] | None = None) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.request(method, path, content=body, headers=headers or {})

    return async_to_sync(send)()


def assert_401(status: int, headers: Any, body: bytes) -> None:
    assert status == 401, body
    assert headers["WWW-Authenticate"] == 'Basic realm="millrace"'
    answer = json.loads(body)
    assert answer["error_code"] == 40101 and answer["message"].startswith("Unauthorized")


BAD_HEADERS = [
    None,
    "Basic",
    "Basic !!!not-base64!!!",
    "Basic " + base64.b64encode(b"no-colon").decode(),
    "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),  # not UTF-8
    "Bearer abc",
    basic(USER, "wrong-password"),
    basic("nobody", PASSWORD),
]


@pytest.mark.parametrize("header", BAD_HEADERS)
def test_without_valid_credentials_both_apis_answer_401(auth_on: None, header: str | None
                                                        ) -> None:
    headers = {"Authorization": header} if header else {}
    client = Client(headers=headers)
    for path in (f"{REGISTRY}/subjects", f"{PROXY}/topics", f"{PROXY}/v3/clusters"):
        response = client.get(path)
        assert_401(response.status_code, response, response.content)
        over_asgi = asgi("GET", path, headers=headers)
        assert_401(over_asgi.status_code, over_asgi.headers, over_asgi.content)


def test_the_fast_lanes_refuse_too(auth_on: None) -> None:
    for method, path, body, content_type in [
        ("GET", f"{REGISTRY}/schemas/ids/1", None, V1),
        ("POST", f"{REGISTRY}/subjects/s-value/versions", json.dumps({"schema": SCHEMA}), V1),
        ("POST", f"{PROXY}/topics/t", json.dumps({"records": [{"value": "eA=="}]}),
         "application/vnd.kafka.binary.v2+json"),
    ]:
        response = asgi(method, path, body, {"Content-Type": content_type,
                                             "Authorization": basic(USER, "nope")})
        assert_401(response.status_code, response.headers, response.content)


def test_a_scram_user_of_the_cluster_is_served(auth_on: None) -> None:
    headers = {"Authorization": basic(USER, PASSWORD), "Content-Type": V1}
    registered = asgi("POST", f"{REGISTRY}/subjects/auth-value/versions",
                      json.dumps({"schema": SCHEMA}), headers)
    assert registered.status_code == 200, registered.content
    schema_id = registered.json()["id"]
    by_lane = asgi("GET", f"{REGISTRY}/schemas/ids/{schema_id}", headers=headers)
    assert by_lane.status_code == 200 and json.loads(by_lane.json()["schema"])["name"] == "User"
    by_client = Client(headers={"Authorization": basic(USER, PASSWORD)}).get(
        f"{REGISTRY}/subjects")
    assert by_client.status_code == 200 and by_client.json() == ["auth-value"]
    topics = asgi("GET", f"{PROXY}/topics", headers=headers)
    assert topics.status_code == 200, topics.content
    # the other mechanism's user is a user of the cluster too, once the login asks for it
    other, other_password = SCRAM_USERS["SCRAM-SHA-256"]
    with override_settings(MILLRACE_HTTP_AUTH_SASL_MECHANISM="SCRAM-SHA-256"):
        assert asgi("GET", f"{REGISTRY}/subjects",
                    headers={"Authorization": basic(other, other_password)}).status_code == 200


def test_an_accepted_login_is_cached_and_only_for_its_password(auth_on: None) -> None:
    headers = {"Authorization": basic(USER, PASSWORD)}
    assert asgi("GET", f"{REGISTRY}/subjects", headers=headers).status_code == 200
    assert httpauth.verified.hit(USER, PASSWORD)
    assert not httpauth.verified.hit(USER, PASSWORD + "x")
    wrong = asgi("GET", f"{REGISTRY}/subjects",
                 headers={"Authorization": basic(USER, PASSWORD + "x")})
    assert_401(wrong.status_code, wrong.headers, wrong.content)


def test_an_unreachable_cluster_is_503_not_401(auth_on: None, broker: Any) -> None:
    with override_settings(MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS="127.0.0.1:9",
                           MILLRACE_HTTP_AUTH_TIMEOUT_S=1.0):
        response = asgi("GET", f"{PROXY}/topics",
                        headers={"Authorization": basic("someone", "secret")})
    assert response.status_code == 503 and response.json()["error_code"] == 50302


def test_off_by_default_nothing_asks_for_credentials(transactional_db: None) -> None:
    assert settings.MILLRACE_HTTP_AUTH is False
    assert asgi("GET", f"{REGISTRY}/subjects").status_code == 200
