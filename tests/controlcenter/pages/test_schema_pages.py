"""The Schemas pages and /api/v1/schemas: subjects, versions with a side-by-side diff,
compatibility levels and registering after a test, all through the registry app in-process,
audited, refused to anonymous users and users without the permission."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from django.test import Client

from controlcenter import schemadiff
from controlcenter.access import Capability
from controlcenter.models import AuditEntry
from registry import lookups
from registry.actions import SchemaRequest, register_schema, set_compatibility
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db


def user_schema(*extra_fields: Mapping[str, object]) -> str:
    fields = [{"name": "id", "type": "long"}, *extra_fields]
    return json.dumps({"type": "record", "name": "User", "namespace": "com.example",
                       "fields": fields})


EMAIL: dict[str, object] = {"name": "email", "type": ["null", "string"], "default": None}
REQUIRED_AGE: dict[str, object] = {"name": "age", "type": "int"}  # no default: not BACKWARD


@pytest.fixture
def subjects() -> None:
    register_schema("users-value", SchemaRequest(user_schema()), normalize=False)
    register_schema("users-value", SchemaRequest(user_schema(EMAIL)), normalize=False)
    register_schema("orders/eu-value", SchemaRequest(json.dumps("string")), normalize=False)


@pytest.fixture
def editor(client: Client) -> Client:
    make_user("editor", Capability.CHANGE_SCHEMAS)
    client.login(username="editor", password=PASSWORD)
    return client


def test_the_diff_pairs_changed_lines_and_pads_insertions() -> None:
    rows = schemadiff.side_by_side(user_schema(), user_schema(EMAIL))
    added = [r.right.text.strip() for r in rows if r.right.change == "add"]
    assert '"name": "email",' in added and all(r.left.number is None for r in rows
                                                 if r.right.change == "add")
    assert schemadiff.changed_lines(schemadiff.side_by_side(user_schema(), user_schema())) == 0
    assert schemadiff.pretty("not json") == "not json"


def test_subjects_are_listed_searched_and_show_their_level(client: Client, subjects: None) -> None:
    set_compatibility("users-value", "FULL", None)
    html = client.get("/schemas/").content.decode()
    assert html.count("<tr data-subject=") == 2 and "FULL" in html and "global (BACKWARD)" in html
    found = client.get("/schemas/?q=orders").content.decode()
    assert found.count("<tr data-subject=") == 1 and "/schemas/orders/eu-value/" in found


def test_a_subject_shows_its_versions_side_by_side(client: Client, subjects: None) -> None:
    html = client.get("/schemas/users-value/").content.decode()
    assert html.count("<tr data-version=") == 2
    diff = html[html.index('id="schema-diff"'):html.index('id="schema-shown"')]
    assert 'class="add">' in diff and "email" in diff and "between v1" in diff
    same = client.get("/schemas/users-value/?from=2&to=2").content.decode()
    assert "v2 and v2 are the same" in same
    assert client.get("/schemas/orders/eu-value/").status_code == 200
    assert client.get("/schemas/nope/").status_code == 404


def test_a_version_is_tested_then_registered_and_audited(editor: Client, subjects: None) -> None:
    url = "/schemas/+register/users-value/"
    incompatible = editor.post(url, {"schema": user_schema(EMAIL, REQUIRED_AGE),
                                     "action": "test"}).content.decode()
    assert "Incompatible" in incompatible and "age" in incompatible
    refused = editor.post(url, {"schema": user_schema(EMAIL, REQUIRED_AGE),
                                "action": "register"})
    assert refused.status_code == 400 and "error_code 409" in refused.content.decode()
    ok = user_schema(EMAIL, REQUIRED_AGE | {"default": 0})
    assert "compatible</span>" in editor.post(url, {"schema": ok, "action": "test"}
                                               ).content.decode()
    done = editor.post(url, {"schema": ok, "action": "register"})
    assert done.status_code == 302 and len(lookups.subject_versions("users-value")) == 3
    invalid = editor.post(url, {"schema": '{"type": "record"}', "action": "register"})
    assert "error_code 42201" in invalid.content.decode()
    results = list(AuditEntry.objects.order_by("id").values_list("action", "result"))
    assert results == [("schema.register", "error"), ("schema.register", "ok"),
                       ("schema.register", "error")]


def test_compatibility_levels_are_set_and_cleared(editor: Client, subjects: None) -> None:
    editor.post("/schemas/+compatibility/users-value/", {"compatibility": "NONE"})
    assert lookups.compatibility_level("users-value").value == "NONE"
    editor.post("/schemas/+compatibility/users-value/", {"clear": "1"})
    assert lookups.compatibility_level("users-value").value == "BACKWARD"
    editor.post("/schemas/+compatibility/", {"compatibility": "FORWARD_TRANSITIVE"})
    assert lookups.compatibility_level(None).value == "FORWARD_TRANSITIVE"
    bad = editor.post("/schemas/+compatibility/", {"compatibility": "SIDEWAYS"}, follow=True)
    assert "valid choice" in bad.content.decode()
    cleared = editor.post("/schemas/+compatibility/orders/eu-value/", {"clear": "1"}, follow=True)
    assert "40408" in cleared.content.decode()  # no level of its own: the registry says so


def test_anonymous_users_and_users_without_the_permission_change_no_schema(
        client: Client, subjects: None) -> None:
    posts = [("/schemas/+register/users-value/", {"schema": user_schema(), "action": "register"}),
             ("/schemas/+compatibility/users-value/", {"compatibility": "NONE"}),
             ("/schemas/+compatibility/", {"compatibility": "NONE"})]
    for url, body in posts:
        response = client.post(url, body)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    api = client.put("/api/v1/schemas/compatibility", {"compatibility": "NONE"},
                     content_type="application/json")
    assert api.status_code == 403  # anonymous: refused, with a JSON body
    make_user("viewer")
    client.login(username="viewer", password=PASSWORD)
    for url, body in posts:
        assert client.post(url, body).status_code == 403, url
    assert client.post("/api/v1/schemas/subjects/users-value", {"schema": user_schema()},
                       content_type="application/json").status_code == 403
    # The test changes nothing, so a viewer may run it.
    assert client.post("/schemas/+register/users-value/", {"schema": user_schema(),
                                                           "action": "test"}).status_code == 200
    assert lookups.compatibility_level(None).value == "BACKWARD"
    assert not AuditEntry.objects.exists()


def test_the_schema_api_serves_subjects_diffs_and_changes(editor: Client, subjects: None) -> None:
    listing = editor.get("/api/v1/schemas/subjects").json()
    assert [s["name"] for s in listing["results"]] == ["orders/eu-value", "users-value"]
    one = editor.get("/api/v1/schemas/subjects/users-value").json()
    assert [v["version"] for v in one["versions"]] == [1, 2] and one["compatibility"] == "BACKWARD"
    diff = editor.get("/api/v1/schemas/subjects/users-value/diff?from=1&to=2").json()
    assert diff["changed"] > 0 and diff["rows"][0]["left"]["number"] == 1
    check = editor.post("/api/v1/schemas/subjects/users-value/compatibility-check",
                        {"schema": user_schema(EMAIL, REQUIRED_AGE)},
                        content_type="application/json").json()
    assert check["is_compatible"] is False and check["messages"]
    conflict = editor.post("/api/v1/schemas/subjects/users-value",
                           {"schema": user_schema(EMAIL, REQUIRED_AGE)},
                           content_type="application/json")
    assert conflict.status_code == 409 and conflict.json()["error_code"] == "409"
    made = editor.post("/api/v1/schemas/subjects/new-value", {"schema": user_schema()},
                       content_type="application/json").json()
    assert made["version"] == 1
    level = editor.put("/api/v1/schemas/subjects/new-value/compatibility",
                       {"compatibility": "full"}, content_type="application/json")
    assert level.json() == {"compatibility": "FULL"}
    assert editor.delete("/api/v1/schemas/subjects/new-value/compatibility").json() == {
        "compatibility": "BACKWARD"}
