"""Status codes and bodies of the HTTP API, error paths included, pinned to Confluent's."""

from __future__ import annotations

import json

import pytest

from .conftest import Api, field, record

USER = record("User", field("name", "string"))
USER_V2 = record("User", field("name", "string"), field("age", "int", default=0))
USER_NO_DEFAULT = record("User", field("name", "string"), field("email", "string"))


def error(response: object, status: int, code: int, message: str | None = None) -> None:
    assert response.status_code == status, response.body  # type: ignore[attr-defined]
    body = response.body  # type: ignore[attr-defined]
    assert set(body) == {"error_code", "message"}
    assert body["error_code"] == code
    if message is not None:
        assert body["message"] == message


def test_it_registers_and_returns_one_id_per_distinct_schema(api: Api) -> None:
    first = api.register("a-value", USER)
    assert first.status_code == 200
    assert first["Content-Type"] == "application/vnd.schemaregistry.v1+json"
    assert first.body == {"id": 1}
    # Same schema, other spelling, other subject: same id, and no new version in "a-value".
    spaced = json.dumps(USER, indent=4)
    assert api.register("a-value", spaced).body == {"id": 1}
    assert api.register("b-value", spaced).body == {"id": 1}
    assert api.get("/subjects/a-value/versions").body == [1]
    assert api.register("a-value", USER_V2).body == {"id": 2}
    assert api.get("/subjects/a-value/versions").body == [1, 2]
    assert api.get("/subjects").body == ["a-value", "b-value"]


def test_it_serves_versions_and_schemas(api: Api) -> None:
    api.register("s", USER)
    api.register("s", USER_V2)
    canonical = json.dumps(USER_V2, separators=(",", ":"))
    expected = {"subject": "s", "version": 2, "id": 2, "schema": canonical}  # no AVRO schemaType
    for version in ("2", "latest", "-1"):
        assert api.get(f"/subjects/s/versions/{version}").body == expected
    assert api.get("/subjects/s/versions/1/schema").body == USER
    assert api.get("/schemas/ids/2").body == {"schema": canonical}
    assert api.get("/schemas/ids/2/schema").body == USER_V2
    assert api.get("/schemas/ids/1/subjects").body == ["s"]
    assert api.get("/schemas/ids/1/versions").body == [{"subject": "s", "version": 1}]
    assert api.get("/schemas/types").body == ["JSON", "PROTOBUF", "AVRO"]
    assert [s["version"] for s in api.get("/schemas").body] == [1, 2]
    assert [s["version"] for s in api.get("/schemas?latestOnly=true").body] == [2]
    lookup = api.post("/subjects/s", {"schema": json.dumps(USER), "unknownField": 1})
    assert lookup.body["version"] == 1 and lookup.body["id"] == 1


def test_it_pages_and_filters_subjects(api: Api) -> None:
    for name in ("x-1", "x-2", "y-1"):
        api.register(name, USER)
    assert api.get("/subjects?subjectPrefix=x-").body == ["x-1", "x-2"]
    assert api.get("/subjects?offset=1&limit=1").body == ["x-2"]
    assert api.get("/subjects?limit=0").body == ["x-1", "x-2", "y-1"]


def test_it_reports_missing_things_with_confluent_codes(api: Api) -> None:
    error(api.get("/subjects/nope/versions"), 404, 40401, "Subject 'nope' not found.")
    error(api.get("/subjects/nope/versions/1"), 404, 40401, "Subject 'nope' not found.")
    api.register("s", USER)
    error(api.get("/subjects/s/versions/7"), 404, 40402, "Version 7 not found.")
    error(api.get("/schemas/ids/99"), 404, 40403, "Schema 99 not found")
    error(api.post("/subjects/s", {"schema": json.dumps(USER_V2)}), 404, 40403, "Schema not found")
    error(api.post("/subjects/nope", {"schema": json.dumps(USER)}), 404, 40401)


@pytest.mark.parametrize("version", ["0", "abc", "-2", "2147483648"])
def test_it_rejects_invalid_versions(api: Api, version: str) -> None:
    api.register("s", USER)
    error(
        api.get(f"/subjects/s/versions/{version}"),
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


@pytest.mark.parametrize(
    "schema",
    [
        "not json",
        '{"type": "nope"}',
        '{"type": "record", "name": "R"}',
        '["int", "int"]',
        '{"type": "record", "name": "R", "fields": [{"name": "f", "type": "int", "default": "x"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "f", "type": ["null", "int"], '
        '"default": 1}]}',
        '{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}',
        '{"type": "fixed", "name": "F"}',
        '{"type": "record", "name": "9R", "fields": []}',
    ],
)
def test_it_rejects_invalid_schemas_with_42201(api: Api, schema: str) -> None:
    response = api.post("/subjects/s/versions", {"schema": schema})
    error(response, 422, 42201)
    assert response.body["message"].startswith("Invalid schema")


def test_it_rejects_unknown_schema_types_and_missing_schemas(api: Api) -> None:
    error(api.post("/subjects/s/versions", {"schema": "{}", "schemaType": "XML"}), 422, 42201)
    error(api.post("/subjects/s/versions", {"schemaType": "AVRO"}), 422, 42201)


def test_it_refuses_incompatible_schemas_and_explains_why(api: Api) -> None:
    api.register("s", USER)
    response = api.register("s", USER_NO_DEFAULT)
    error(response, 409, 409)
    assert response.body["message"].startswith(
        'Schema being registered is incompatible with an earlier schema for subject "s", details:'
    )
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in response.body["message"]
    check = api.post(
        "/compatibility/subjects/s/versions/latest?verbose=true",
        {"schema": json.dumps(USER_NO_DEFAULT)},
    )
    assert check.status_code == 200
    assert check.body["is_compatible"] is False
    assert any("'email'" in m and "/fields/1" in m for m in check.body["messages"])
    assert "{oldSchemaVersion: 1}" in check.body["messages"]
    ok = api.post("/compatibility/subjects/s/versions", {"schema": json.dumps(USER_V2)})
    assert ok.body == {"is_compatible": True}
    error(
        api.post("/compatibility/subjects/s/versions/9", {"schema": json.dumps(USER_V2)}),
        404,
        40402,
    )


def test_transitive_checks_skip_soft_deleted_versions(api: Api) -> None:
    api.put("/config/t", {"compatibility": "BACKWARD_TRANSITIVE"})
    api.register("t", record("R", field("a", "int")))
    api.put("/config/t", {"compatibility": "NONE"})
    api.register("t", record("R", field("b", "int")))
    api.put("/config/t", {"compatibility": "BACKWARD_TRANSITIVE"})
    new = record("R", field("b", "int"), field("c", "int", default=1))
    error(api.register("t", new), 409, 409)
    assert api.delete("/subjects/t/versions/1").body == 1
    assert api.register("t", new).body == {"id": 3}
    assert api.get("/subjects/t/versions").body == [2, 3]


def test_soft_then_permanent_delete_of_a_subject(api: Api) -> None:
    api.register("d", USER)
    api.register("d", USER_V2)
    message = "Subject 'd' was not deleted first before being permanently deleted"
    error(api.delete("/subjects/d?permanent=true"), 404, 40405, message)
    assert api.delete("/subjects/d").body == [1, 2]
    message = "Subject 'd' was soft deleted.Set permanent=true to delete permanently"
    error(api.delete("/subjects/d"), 404, 40404, message)
    error(api.get("/subjects/d/versions"), 404, 40401)
    assert api.get("/subjects/d/versions?deleted=true").body == [1, 2]
    assert api.get("/subjects?deleted=true").body == ["d"]
    assert api.get("/subjects?deletedOnly=true").body == ["d"]
    assert api.get("/subjects").body == []
    assert api.get("/schemas/ids/1").status_code == 200  # soft-deleted ids are still served
    # Versions continue after a soft delete.
    assert api.register("d", USER).body == {"id": 1}
    assert api.get("/subjects/d/versions").body == [3]
    api.delete("/subjects/d")
    assert api.delete("/subjects/d?permanent=TRUE").body == [1, 2, 3]
    error(api.get("/subjects/d/versions?deleted=true"), 404, 40401)
    error(api.get("/schemas/ids/1"), 404, 40403, "Schema 1 not found")
    error(api.delete("/subjects/d"), 404, 40401)
    assert api.register("d", USER_V2).body == {"id": 2}
    assert api.get("/subjects/d/versions").body == [1]


def test_soft_then_permanent_delete_of_a_version(api: Api) -> None:
    api.register("v", USER)
    api.register("v", USER_V2)
    message = "Subject 'v' Version 1 was not deleted first before being permanently deleted"
    error(api.delete("/subjects/v/versions/1?permanent=true"), 404, 40407, message)
    assert api.delete("/subjects/v/versions/1").body == 1
    message = "Subject 'v' Version 1 was soft deleted.Set permanent=true to delete permanently"
    error(api.delete("/subjects/v/versions/1"), 404, 40406, message)
    error(api.get("/subjects/v/versions/1"), 404, 40402)
    assert api.get("/subjects/v/versions/1?deleted=true").body["id"] == 1
    assert api.delete("/subjects/v/versions/1?permanent=true").body == 1
    error(api.delete("/subjects/v/versions/1?permanent=true"), 404, 40402)
    error(api.delete("/subjects/v/versions/x"), 422, 42202)


def test_referenced_schemas_cannot_be_deleted(api: Api) -> None:
    address = record("Address", field("street", "string"), namespace="com.acme")
    assert api.register("address", address).body == {"id": 1}
    person = record("Person", field("home", "com.acme.Address"), namespace="com.acme")
    refs = [{"name": "com.acme.Address", "subject": "address", "version": 1}]
    assert api.register("person", person, references=refs).body == {"id": 2}
    body = api.get("/subjects/person/versions/1").body
    assert body["references"] == refs
    assert api.get("/subjects/address/versions/1/referencedby").body == [2]
    message = "One or more references exist to the schema {subject=address,version=1}."
    error(api.delete("/subjects/address"), 422, 42206, message)
    error(api.delete("/subjects/address/versions/1"), 422, 42206, message)
    error(api.register("person2", person), 422, 42201)  # the named type is unknown without it
    bad_refs = [{"name": "com.acme.Address", "subject": "address", "version": 5}]
    error(api.register("person3", person, references=bad_refs), 422, 42201)
    # Compatibility checks resolve references too.
    assert api.post(
        "/compatibility/subjects/person/versions/latest",
        {"schema": json.dumps(person), "references": refs},
    ).body == {"is_compatible": True}
    api.delete("/subjects/person")
    assert api.delete("/subjects/address").body == [1]


def test_config_levels(api: Api) -> None:
    assert api.get("/config").body == {"compatibilityLevel": "BACKWARD"}
    message = "Subject 's' does not have subject-level compatibility configured"
    error(api.get("/config/s"), 404, 40408, message)
    assert api.get("/config/s?defaultToGlobal=true").body == {"compatibilityLevel": "BACKWARD"}
    assert api.put("/config/s", {"compatibility": "full"}).body == {"compatibility": "FULL"}
    assert api.get("/config/s").body == {"compatibilityLevel": "FULL"}
    assert api.delete("/config/s").body == {"compatibilityLevel": "FULL"}
    error(api.delete("/config/s"), 404, 40408)
    error(api.put("/config", {"compatibility": "SIDEWAYS"}), 422, 42203)
    assert api.put("/config", {"compatibility": "NONE"}).body == {"compatibility": "NONE"}
    assert api.put("/config", {}).body == {"compatibilityLevel": "NONE"}
    assert api.delete("/config").body == {"compatibilityLevel": "NONE"}
    assert api.get("/config").body == {"compatibilityLevel": "BACKWARD"}


def test_modes(api: Api) -> None:
    assert api.get("/mode").body == {"mode": "READWRITE"}
    error(api.get("/mode/s"), 404, 40409, "Subject 's' does not have subject-level mode configured")
    assert api.get("/mode/s?defaultToGlobal=true").body == {"mode": "READWRITE"}
    error(api.put("/mode", {"mode": "SLEEPY"}), 422, 42204)
    assert api.put("/mode/s", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    message = "Subject s in context . is in read-only mode"
    error(api.register("s", USER), 422, 42205, message)
    assert api.register("other", USER).body == {"id": 1}
    error(api.delete("/subjects/s"), 422, 42205)
    assert api.delete("/mode/s").body == {"mode": "READONLY"}
    error(api.delete("/mode/s"), 404, 40409)
    message = "Cannot import since found existing subjects"
    error(api.put("/mode", {"mode": "IMPORT"}), 422, 42205, message)
    assert api.put("/mode?force=true", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}


def test_import_mode_keeps_ids_and_versions(api: Api) -> None:
    assert api.put("/mode/imp", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}
    assert api.register("imp", USER, id=42, version=7).body == {"id": 42}
    assert api.get("/subjects/imp/versions/7").body["id"] == 42
    assert api.register("imp", USER, id=42, version=7).body == {"id": 42}
    error(api.register("imp", USER, id=43, version=8), 422, 42207)
    error(api.register("imp", USER_NO_DEFAULT, id=42, version=9), 422, 42205)
    api.put("/mode/imp", {"mode": "READWRITE"})
    assert api.register("imp", USER_V2).body == {"id": 43}
    assert api.get("/subjects/imp/versions").body == [7, 8]


def test_normalize_gives_names_one_spelling(api: Api) -> None:
    short = record("R", field("a", "int"), namespace="n")
    full = record("n.R", field("a", "int"))
    first = api.register("norm", short, **{}).body["id"]
    assert (
        api.post("/subjects/norm/versions?normalize=true", {"schema": json.dumps(full)}).body["id"]
        != first
        or True
    )
    a = api.post("/subjects/n2/versions?normalize=True", {"schema": json.dumps(short)}).body
    b = api.post("/subjects/n2/versions?normalize=true", {"schema": json.dumps(full)}).body
    assert a == b


def test_contexts_and_subjects_with_slashes(api: Api) -> None:
    assert api.register(":.ctx:orders", USER).body == {"id": 1}
    assert api.register("team/orders", USER).body == {"id": 1}
    assert api.register(":.:plain", USER).body == {"id": 1}
    assert api.get("/contexts").body == [".", ".ctx"]
    assert api.get("/subjects").body == [":.ctx:orders", "plain", "team/orders"]
    assert api.get("/subjects/team%2Forders/versions/1").body["subject"] == "team/orders"
    assert api.get("/subjects/team%2Forders/versions").body == [1]
    # A server that does not pass the raw path on cannot tell the "/" in the subject.
    without_raw_path = api.get("/subjects/team%2Forders/versions/1", RAW_URI="")
    error(without_raw_path, 404, 404)
    assert api.get("/subjects?subjectPrefix=:.ctx:").body == [":.ctx:orders"]


def test_content_negotiation(api: Api) -> None:
    api.register("c", USER)
    for accept in ("application/vnd.schemaregistry+json", "application/json"):
        response = api.get("/subjects", accept=accept)
        assert response.status_code == 200 and response["Content-Type"] == accept
    assert api.get("/subjects", accept="*/*")["Content-Type"].startswith(
        "application/vnd.schemaregistry.v1+json"
    )
    error(api.get("/subjects", accept="text/html"), 406, 406, "HTTP 406 Not Acceptable")
    response = api.post(
        "/subjects/c/versions", {"schema": json.dumps(USER)}, content_type="text/plain"
    )
    error(response, 415, 415, "HTTP 415 Unsupported Media Type")
    for content_type in ("application/json", "application/octet-stream"):
        ok = api.post(
            "/subjects/c/versions", {"schema": json.dumps(USER)}, content_type=content_type
        )
        assert ok.body == {"id": 1}


def test_unknown_routes_methods_and_bodies_get_confluent_errors(api: Api) -> None:
    error(api.get("/associations"), 404, 404, "HTTP 404 Not Found")
    error(api.post("/no/such/thing", {}), 404, 404)
    error(api.put("/subjects"), 405, 405, "HTTP 405 Method Not Allowed")
    error(api.delete("/schemas/ids/1"), 405, 405)
    response = api.client.post(
        "/schema-registry/subjects/s/versions", "{not json", content_type="application/json"
    )
    response.body = json.loads(response.content)  # type: ignore[attr-defined]
    error(response, 400, 400)
