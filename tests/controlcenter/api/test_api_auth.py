"""The JSON API (/api/v1/) and the collector's lag metrics with MILLRACE_HTTP_AUTH on, against
a real broker's SCRAM users: no credentials is 401 in the API's error shape with a Basic
challenge; a cluster user's Basic credentials, an API token (made on the page, as Bearer or
Token) and the browser's session are served; wrong ones are 401. With auth off the API
answers as before (anonymous reads, 403 for anonymous writes) and metrics need nothing."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

import httpauth
from brokercluster.ports import free_port
from controlcenter.apitokens import replace_token
from controlcenter.collector.metrics import LagMetrics, serve
from tests.securebroker import SCRAM_USERS, SecuredBroker, start_secured_broker

USER, PASSWORD = SCRAM_USERS["SCRAM-SHA-512"]
API = "/api/v1/groups"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    secured = start_secured_broker(tmp_path_factory.mktemp("api-auth"))
    yield secured
    secured.process.stop()


@pytest.fixture
def auth_on(broker: SecuredBroker, transactional_db: None) -> Iterator[None]:
    with override_settings(
            MILLRACE_HTTP_AUTH=True,
            KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap("PLAINTEXT"),
            MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS=broker.bootstrap("SASL_PLAINTEXT"),
            MILLRACE_HTTP_AUTH_SECURITY_PROTOCOL="SASL_PLAINTEXT",
            MILLRACE_HTTP_AUTH_SASL_MECHANISM="SCRAM-SHA-512"):
        httpauth.verified.clear()
        yield
        httpauth.verified.clear()


@pytest.fixture(scope="module")
def metrics_url() -> Iterator[str]:
    port = free_port()
    server = serve(LagMetrics("test"), "127.0.0.1", port)
    yield f"http://127.0.0.1:{port}/metrics"
    server.shutdown()
    server.server_close()


def assert_401(response: Any, body: bytes) -> dict[str, Any]:
    assert response.status_code == 401, body
    assert response.headers["WWW-Authenticate"] == 'Basic realm="millrace"'
    answer: dict[str, Any] = json.loads(body)
    assert set(answer) == {"error_code", "message"}
    return answer


@pytest.mark.parametrize("header", [None, basic(USER, "wrong"), basic("nobody", "x"),
                                    "Basic !!!", "Bearer no-such-token", "Token x y"])
def test_the_api_refuses_without_good_credentials(auth_on: None, client: Client,
                                                  header: str | None) -> None:
    response = client.get(API, headers={"Authorization": header} if header else {})
    assert_401(response, response.content)


def test_a_cluster_user_is_served_with_basic_and_acts_as_a_django_user(
        auth_on: None, client: Client) -> None:
    response = client.get(API, HTTP_AUTHORIZATION=basic(USER, PASSWORD))
    assert response.status_code == 200, response.content
    user = User.objects.get(username=USER)
    assert not user.has_usable_password()
    # No capability yet: a change is refused (403, not 401: the caller is known).
    refused = client.post(f"{API}/nobody/reset-offsets", {},
                          HTTP_AUTHORIZATION=basic(USER, PASSWORD))
    assert refused.status_code == 403


def test_a_token_made_on_the_page_is_served_as_bearer_and_token(auth_on: None,
                                                                client: Client) -> None:
    owner = User.objects.create_user("scripter", password="pw")
    client.force_login(owner)
    page = client.post("/account/api-token/")
    key = page.context["key"]
    assert page.status_code == 200 and key in page.content.decode()
    client.logout()
    for scheme in ("Bearer", "Token"):
        assert client.get(API, HTTP_AUTHORIZATION=f"{scheme} {key}").status_code == 200
    replaced = client.post("/account/api-token/")  # signed out: to the login page
    assert replaced.status_code == 302
    assert client.get(API, HTTP_AUTHORIZATION="Bearer " + key[::-1]).status_code == 401


def test_the_browser_session_still_works(auth_on: None, client: Client) -> None:
    client.force_login(User.objects.create_user("browser", password="pw"))
    assert client.get(API).status_code == 200


def test_metrics_need_a_token_or_a_cluster_user(auth_on: None, metrics_url: str) -> None:
    refused = httpx.get(metrics_url)
    assert_401(refused, refused.content)
    wrong = httpx.get(metrics_url, headers={"Authorization": basic(USER, "wrong")})
    assert_401(wrong, wrong.content)
    assert httpx.get(metrics_url, headers={"Authorization": basic(USER, PASSWORD)}
                     ).status_code == 200
    key = replace_token(User.objects.create_user("prometheus"))
    assert httpx.get(metrics_url, headers={"Authorization": f"Bearer {key}"}
                     ).status_code == 200


@pytest.mark.django_db
def test_with_auth_off_nothing_changes(client: Client, metrics_url: str) -> None:
    assert client.get(API).status_code == 200
    assert client.post(f"{API}/nobody/reset-offsets", {}).status_code == 403
    assert httpx.get(metrics_url).status_code == 200
