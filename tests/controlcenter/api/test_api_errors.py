"""The control center's JSON API fails the way the registry and the REST proxy do: every
error, DRF's own included, is Confluent's body `{"error_code", "message"}` (apierrors/), with
the status that says what kind of error it is."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from controlcenter.access import Capability
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def analyst() -> Client:
    client = Client()
    user: User = make_user("errors-analyst", Capability.RUN_ANALYSES)
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_drf_s_own_errors_come_in_confluent_s_body(analyst: Client) -> None:
    anonymous = Client().post("/api/v1/analysis", {"job": "eta"},
                              content_type="application/json")
    assert anonymous.status_code == 403
    assert anonymous.json()["error_code"] == "NOT_AUTHENTICATED" and anonymous.json()["message"]
    missing = analyst.get("/api/v1/analysis/999999")
    assert missing.status_code == 404
    assert missing.json()["error_code"] == "NOT_FOUND" and missing.json()["message"]
    wrong_method = analyst.delete("/api/v1/analysis")
    assert wrong_method.status_code == 405 and "POST" in wrong_method["Allow"]
    assert wrong_method.json()["error_code"] == "METHOD_NOT_ALLOWED"
    not_json = analyst.post("/api/v1/analysis", "{", content_type="application/json")
    assert not_json.status_code == 400 and not_json.json()["error_code"] == "PARSE_ERROR"


def test_the_api_s_own_refusals_keep_their_codes_and_form_fields(analyst: Client) -> None:
    unknown = analyst.post("/api/v1/analysis", {"job": "nope"}, content_type="application/json")
    assert unknown.status_code == 400
    assert set(unknown.json()) == {"error_code", "message"}
    assert unknown.json()["error_code"] == "INVALID_REQUEST"
    invalid = analyst.post("/api/v1/analysis/schedules",
                           {"job": "eta", "name": "x", "every_minutes": 0},
                           content_type="application/json")
    assert invalid.status_code == 400 and invalid.json()["error_code"] == "INVALID_REQUEST"
    assert "every_minutes" in invalid.json()["fields"]
