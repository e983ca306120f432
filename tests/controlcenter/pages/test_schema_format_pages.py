"""The Schemas pages and /api/v1/schemas with JSON Schema and Protobuf subjects: each shown
and diffed in its own form (JSON pretty-printed, .proto as text), highlighted, and tested
then registered from the form and the API, references included, through the registry app."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from controlcenter import highlight, schemadiff
from controlcenter.access import Capability
from controlcenter.models import AuditEntry
from registry import lookups
from registry.actions import SchemaRequest, register_schema
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db

TAGS = re.compile(r"<[^>]+>")


def payment(**extra: object) -> str:
    properties: dict[str, object] = {"id": {"type": "integer"}, **extra}
    return json.dumps({"type": "object", "properties": properties, "required": ["id"],
                       "additionalProperties": False})  # closed: properties may be added


def order(extra: str = "") -> str:
    return ('syntax = "proto3";\npackage shop;\n\nmessage Order {\n  int64 id = 1;\n'
            f"{extra}}}\n")


@pytest.fixture
def editor(client: Client) -> Client:
    make_user("editor", Capability.CHANGE_SCHEMAS)
    client.login(username="editor", password=PASSWORD)
    return client


@pytest.fixture
def subjects() -> None:
    for text in (payment(), payment(note={"type": "string"})):
        register_schema("payments-value", SchemaRequest(text, "JSON"), normalize=False)
    for text in (order(), order('  string item = 2;\n')):
        register_schema("orders-value", SchemaRequest(text, "PROTOBUF"), normalize=False)


def cells(html: str, change: str) -> list[str]:
    """The text of the diff's cells marked `change`, tags stripped."""
    diff = html[html.index('id="schema-diff"'):html.index('id="schema-shown"')]
    found = re.findall(rf'<td class="{change}">(.*?)</td>', diff, re.S)
    return [TAGS.sub("", cell).replace("&quot;", '"').strip() for cell in found]


def test_highlighting_keeps_every_line_and_escapes_the_text() -> None:
    proto = order('  // a <b> comment\n  string item = 2;\n')
    lines = highlight.lines(proto, "PROTOBUF")
    assert len(lines) == len(proto.splitlines())
    assert [TAGS.sub("", line).replace("&lt;", "<").replace("&gt;", ">")
            .replace("&quot;", '"') for line in lines] == proto.splitlines()
    assert '<span class="hl-keyword">message</span>' in lines[3]
    assert '<span class="hl-comment">// a &lt;b&gt; comment' in lines[5]
    as_json = highlight.lines(schemadiff.pretty(payment()), "JSON")
    assert '<span class="hl-key">&quot;type&quot;</span>' in as_json[1]
    assert schemadiff.pretty(order(), "PROTOBUF") == order()


def test_json_schema_and_protobuf_subjects_are_listed_with_their_format(
        client: Client, subjects: None) -> None:
    html = client.get("/schemas/").content.decode()
    rows = dict(re.findall(r'<tr data-subject="([^"]+)">.*?badge-format">([^<]+)<', html, re.S))
    assert rows == {"orders-value": "Protobuf", "payments-value": "JSON Schema"}


def test_a_json_schema_subject_is_shown_and_diffed_as_json(client: Client,
                                                          subjects: None) -> None:
    html = client.get("/schemas/payments-value/").content.decode()
    assert 'id="subject-format">JSON Schema<' in html
    added = cells(html, "add")
    assert '"note": {' in added and '"type": "string"' in added
    assert '<span class="hl-key">&quot;note&quot;</span>' in html
    shown = html[html.index('id="schema-shown"'):]
    assert 'data-format="JSON"' in shown and "JSON Schema, schema id" in shown


def test_a_protobuf_subject_is_shown_and_diffed_as_proto_text(client: Client,
                                                             subjects: None) -> None:
    html = client.get("/schemas/orders-value/").content.decode()
    assert 'id="subject-format">Protobuf<' in html
    assert cells(html, "add") == ["string item = 2;"]
    shown = html[html.index('id="schema-shown"'):]
    assert '<span class="hl-keyword">message</span>' in shown and "syntax" in shown
    assert "Protobuf, schema id" in shown
    form = html[html.index('id="schema-register"'):]
    assert '<option value="PROTOBUF" selected>' in form  # the subject's own format


def test_protobuf_is_tested_then_registered_from_the_form(editor: Client,
                                                          subjects: None) -> None:
    url = "/schemas/+register/orders-value/"
    changed_kind = order('  repeated Line item = 2;\n  message Line { int32 n = 1; }\n')
    incompatible = editor.post(url, {"schema_type": "PROTOBUF", "schema": changed_kind,
                                     "action": "test"}).content.decode()
    assert "Incompatible" in incompatible and "item" in incompatible
    broken = editor.post(url, {"schema_type": "PROTOBUF", "schema": "message {",
                               "action": "register"})
    assert broken.status_code == 400 and "error_code 42201" in broken.content.decode()
    fine = order('  string item = 2;\n  string note = 3;\n')
    tested = editor.post(url, {"schema_type": "PROTOBUF", "schema": fine, "action": "test"})
    assert "compatible</span>" in tested.content.decode()
    done = editor.post(url, {"schema_type": "PROTOBUF", "schema": fine, "action": "register"})
    assert done.status_code == 302
    latest = lookups.subject_versions("orders-value")[-1]
    assert (latest.version, latest.schema.schema_type) == (3, "PROTOBUF")
    entry = AuditEntry.objects.filter(result="ok").get()
    assert entry.parameters["schema_type"] == "PROTOBUF"


def test_references_are_given_as_confluents_api_takes_them(editor: Client,
                                                           subjects: None) -> None:
    register_schema("money.proto", SchemaRequest(
        'syntax = "proto3";\npackage money;\nmessage Amount { int64 cents = 1; }\n',
        "PROTOBUF"), normalize=False)
    text = ('syntax = "proto3";\npackage shop;\nimport "money.proto";\n'
            "message Invoice { money.Amount total = 1; }\n")
    url = "/schemas/+register/invoices-value/"
    missing = editor.post(url, {"schema_type": "PROTOBUF", "schema": text,
                                "action": "register"})
    assert missing.status_code == 400 and "error_code 42201" in missing.content.decode()
    bad = editor.post(url, {"schema_type": "PROTOBUF", "schema": text, "references": "[1]",
                            "action": "register"})
    assert "A JSON list of {name, subject, version} objects." in bad.content.decode()
    references = json.dumps([{"name": "money.proto", "subject": "money.proto", "version": 1}])
    done = editor.post(url, {"schema_type": "PROTOBUF", "schema": text,
                             "references": references, "action": "register"})
    assert done.status_code == 302
    html = editor.get("/schemas/invoices-value/").content.decode()
    assert "Invoice" in html and "money.proto" in html


def test_the_api_tests_registers_and_diffs_every_format(editor: Client,
                                                        subjects: None) -> None:
    listing = editor.get("/api/v1/schemas/subjects").json()["results"]
    assert {s["name"]: s["schemaType"] for s in listing} == {
        "orders-value": "PROTOBUF", "payments-value": "JSON"}
    versions = editor.get("/api/v1/schemas/subjects/payments-value").json()["versions"]
    assert [v["schemaType"] for v in versions] == ["JSON", "JSON"]
    check = editor.post("/api/v1/schemas/subjects/payments-value/compatibility-check",
                        {"schema": payment(note={"type": "integer"}), "schemaType": "JSON"},
                        content_type="application/json").json()
    assert check["is_compatible"] is False and check["messages"]
    made = editor.post("/api/v1/schemas/subjects/payments-value",
                       {"schema": payment(note={"type": "string"}, tip={}),
                        "schemaType": "JSON"}, content_type="application/json")
    assert made.status_code == 200 and made.json()["version"] == 3
    unknown = editor.post("/api/v1/schemas/subjects/x-value",
                          {"schema": "{}", "schemaType": "XML"},
                          content_type="application/json")
    assert unknown.status_code == 422 and unknown.json()["error_code"] == "42201"
    diff = editor.get("/api/v1/schemas/subjects/orders-value/diff?from=1&to=2").json()
    assert [r["right"]["text"].strip() for r in diff["rows"] if r["right"]["change"] == "add"
            ] == ["string item = 2;"]
    assert "html" not in diff["rows"][0]["left"]
