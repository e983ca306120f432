"""JSON Schema subjects over the HTTP API: drafts, references, canonical form, the levels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Api
from .test_http_api import error

DRAFTS = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}
PERSON: dict[str, Any] = {
    "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def register(api: Api, subject: str, schema: Any, **extra: Any) -> Any:
    return api.register(subject, json.dumps(schema), schemaType="JSON", **extra)


@pytest.mark.parametrize("draft", sorted(DRAFTS))
def test_it_registers_each_draft_and_answers_with_the_schema_type(api: Api, draft: str) -> None:
    schema = {"$schema": DRAFTS[draft], **PERSON}
    assert register(api, "p", schema).body == {"id": 1}
    canonical = json.dumps(schema, separators=(",", ":"))
    assert api.get("/schemas/ids/1").body == {"schemaType": "JSON", "schema": canonical}
    assert api.get("/subjects/p/versions/1").body == {
        "subject": "p", "version": 1, "id": 1, "schemaType": "JSON", "schema": canonical}
    assert api.get("/schemas/ids/1/schema").body == schema
    # The same schema spelled another way is found, and registering it again changes nothing.
    spaced = {"schema": json.dumps(schema, indent=2), "schemaType": "JSON"}
    assert api.post("/subjects/p", spaced).body["version"] == 1
    assert register(api, "p", schema).body == {"id": 1}
    # The same text as Avro is another schema: the type is part of what is compared.
    register(api, "s", {"type": "string"})
    error(api.post("/subjects/s", {"schema": '{"type":"string"}'}), 404, 40403)


@pytest.mark.parametrize("schema", [
    "[1, 2]",
    '"a string"',
    '{"type": "strng"}',
    '{"type": "object", "properties": {"a": {"minLength": -1}}}',
    '{"$ref": "#/definitions/missing"}',
    '{"$ref": "other.json"}',
    '{"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}},'
    ' "$ref": "#/definitions/a"}',
    "not json",
    '{"$schema": 5}',
    "[" * 5000 + "]" * 5000,
    '{"properties": ' * 100 + "{}" + "}" * 100,
    '{"$ref": "https://example.com/elsewhere.json"}',  # nothing is fetched
])
def test_it_refuses_what_is_not_a_schema_with_42201_and_stores_nothing(api: Api, schema: str
                                                                       ) -> None:
    response = api.post("/subjects/bad/versions", {"schema": schema, "schemaType": "JSON"})
    error(response, 422, 42201)
    error(api.get("/subjects/bad/versions"), 404, 40401)


def test_references_resolve_by_their_url_and_must_exist(api: Api) -> None:
    address = {"type": "object", "properties": {"street": {"type": "string"}},
               "definitions": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}
    assert register(api, "address", address).body == {"id": 1}
    refs = [{"name": "https://example.com/address.json", "subject": "address", "version": 1}]
    person = {"type": "object", "properties": {
        "home": {"$ref": "https://example.com/address.json"},
        "zip": {"$ref": "https://example.com/address.json#/definitions/zip"}}}
    assert register(api, "person", person, references=refs).body == {"id": 2}
    assert api.get("/schemas/ids/2").body["references"] == refs
    assert api.get("/subjects/address/versions/1/referencedby").body == [2]
    missing = [{"name": "https://example.com/address.json", "subject": "address", "version": 7}]
    error(register(api, "person2", person, references=missing), 422, 42201)
    error(register(api, "person3", person), 422, 42201)  # the $ref names nothing
    error(api.delete("/subjects/address/versions/1"), 422, 42206)


def test_levels_apply_json_schema_rules_with_verbose_reasons(api: Api) -> None:
    closed = {**PERSON, "additionalProperties": False}
    assert register(api, "c", closed).body == {"id": 1}
    wider = {**closed, "properties": {**PERSON["properties"], "age": {"type": "integer"}}}
    assert register(api, "c", wider).body == {"id": 2}  # optional property, closed model
    open_wider = {**PERSON, "properties": {**PERSON["properties"], "x": {"type": "string"}}}
    register(api, "o", PERSON)
    response = register(api, "o", open_wider)
    error(response, 409, 409)
    assert "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in response.body["message"]
    check = api.post("/compatibility/subjects/o/versions/latest?verbose=true",
                     {"schema": json.dumps(open_wider), "schemaType": "JSON"})
    assert check.body["is_compatible"] is False
    assert any("#/properties/x" in m and "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in m
               for m in check.body["messages"])
    # FORWARD: the old schema must read the new one's data; removing a required one fails.
    api.put("/config/o", {"compatibility": "FORWARD"})
    error(register(api, "o", {"type": "object", "properties": {}}), 409, 409)
    api.put("/config/o", {"compatibility": "NONE"})
    assert register(api, "o", open_wider).body == {"id": 4}


def test_normalize_sorts_keys_so_key_order_does_not_matter(api: Api) -> None:
    first = '{"type":"object","properties":{"a":{"type":"string"}}}'
    second = '{"properties":{"a":{"type":"string"}},"type":"object"}'
    one = api.post("/subjects/n/versions?normalize=true", {"schema": first, "schemaType": "JSON"})
    two = api.post("/subjects/n/versions?normalize=true", {"schema": second, "schemaType": "JSON"})
    assert one.body == two.body == {"id": 1}
    assert register(api, "n", json.loads(first)).body == {"id": 2}  # kept as given otherwise


def test_a_subject_does_not_change_type_under_a_level(api: Api) -> None:
    api.register("t", {"type": "string"})
    error(register(api, "t", {"type": "string"}), 409, 409)
