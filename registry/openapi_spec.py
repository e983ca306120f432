"""The registry's OpenAPI description, maintained by hand beside the views it describes.

It does not come from introspecting the views, so it stays true however they are written
(DRF, plain async views); `tests/restproxy/test_openapi.py` keeps it honest: every route
is here, and every operation answers its own example. `millrace/openapi.py` merges it
with the REST proxy's under the mount prefix and serves one document at `/api/schema/`.
"""

from __future__ import annotations

from typing import Any

TAG = "Schema registry"
MEDIA = "application/vnd.schemaregistry.v1+json"
SUBJECT = "orders-value"
SCHEMA = ('{"type":"record","name":"Order","fields":[{"name":"id","type":"int"},'
          '{"name":"note","type":"string","default":""}]}')


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


COMPONENTS: dict[str, Any] = {
    "RegistryError": {
        "type": "object", "required": ["error_code", "message"],
        "description": "Confluent's error body: 40401 subject, 40402 version, 40403 schema "
                       "not found; 42201 invalid schema, 42202 invalid version, 42203 invalid "
                       "compatibility level, 42205 operation not permitted; 409 incompatible "
                       "schema; 50001 store error.",
        "properties": {"error_code": {"type": "integer", "example": 40401},
                       "message": {"type": "string", "example": "Subject 'x' not found."}}},
    "SchemaReference": {
        "type": "object", "required": ["name", "subject", "version"],
        "properties": {"name": {"type": "string"}, "subject": {"type": "string"},
                       "version": {"type": "integer"}}},
    "RegisterSchemaRequest": {
        "type": "object", "required": ["schema"],
        "properties": {"schema": {"type": "string", "description": "The schema as JSON text"},
                       "schemaType": {"type": "string", "enum": ["AVRO", "JSON", "PROTOBUF"],
                                      "default": "AVRO"},
                       "references": array(ref("SchemaReference"))},
        "example": {"schema": SCHEMA}},
    "SchemaId": {"type": "object", "required": ["id"],
                 "properties": {"id": {"type": "integer", "example": 1}}},
    "Schema": {
        "type": "object", "required": ["schema"],
        "properties": {"schema": {"type": "string"}, "schemaType": {"type": "string"},
                       "references": array(ref("SchemaReference"))}},
    "SubjectVersion": {
        "type": "object", "required": ["subject", "version", "id", "schema"],
        "properties": {"subject": {"type": "string"}, "version": {"type": "integer"},
                       "id": {"type": "integer"}, "schema": {"type": "string"},
                       "schemaType": {"type": "string"},
                       "references": array(ref("SchemaReference"))}},
    "SubjectVersionPair": {
        "type": "object", "properties": {"subject": {"type": "string"},
                                         "version": {"type": "integer"}}},
    "CompatibilityCheck": {
        "type": "object", "required": ["is_compatible"],
        "properties": {"is_compatible": {"type": "boolean"},
                       "messages": array({"type": "string"})}},
    "ConfigUpdate": {
        "type": "object", "required": ["compatibility"],
        "properties": {"compatibility": {"type": "string", "enum": [
            "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
            "FULL_TRANSITIVE", "NONE"]}, "normalize": {"type": "boolean"}},
        "example": {"compatibility": "BACKWARD"}},
    "Config": {"type": "object", "properties": {
        "compatibilityLevel": {"type": "string", "example": "BACKWARD"},
        "normalize": {"type": "boolean"}}},
    "Mode": {"type": "object", "required": ["mode"], "properties": {"mode": {
        "type": "string", "enum": ["READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"]}},
        "example": {"mode": "READWRITE"}},
    "RawSchema": {"description": "The schema itself, as JSON", "example": {"type": "string"}},
}


def query(name: str, kind: str = "boolean", about: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": {"type": kind},
            "description": about}


PAGING = [query("offset", "integer", "skip this many"), query("limit", "integer", "at most")]
SUBJECT_PARAM = {"name": "subject", "in": "path", "required": True, "schema": {"type": "string"},
                 "example": SUBJECT, "description": "Subject name (a `/` is sent as %2F)"}
VERSION_PARAM = {"name": "version", "in": "path", "required": True,
                 "schema": {"type": "string"}, "example": "1",
                 "description": "A version number, or `latest`"}
ID_PARAM = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"},
            "example": 1, "description": "Schema id"}
ERRORS = {
    "404": "Subject, version or schema not found (40401, 40402, 40403)",
    "422": "Invalid schema, version or level (42201, 42202, 42203)",
    "500": "Store error (50001)",
}


def op(summary: str, ok: dict[str, Any], *, params: list[dict[str, Any]] | None = None,
       body: str | None = None, status: str = "200",
       errors: tuple[str, ...] = ("404", "422", "500")) -> dict[str, Any]:
    error = {"description": "", "content": {MEDIA: {"schema": ref("RegistryError")}}}
    operation: dict[str, Any] = {
        "tags": [TAG], "summary": summary, "parameters": params or [],
        "responses": {status: {"description": "OK", "content": {MEDIA: {"schema": ok}}},
                      **{code: {**error, "description": ERRORS[code]} for code in errors}},
    }
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {
            MEDIA: {"schema": ref(body), "example": COMPONENTS[body]["example"]}}}
    return operation


STRINGS = array({"type": "string"})
INTS = array({"type": "integer"})
WITH_SUBJECT = [SUBJECT_PARAM]
WITH_VERSION = [SUBJECT_PARAM, VERSION_PARAM]
EMPTY = {"type": "object", "description": "Confluent answers `{}`"}

# Ordered so that each example finds what an earlier one made (the test runs them in order,
# deletions last).
PATHS: dict[str, dict[str, Any]] = {
    "/": {"get": op("Root (`{}`; a browser gets an HTML index)", EMPTY, errors=("500",)),
          "post": op("Root (`{}`)", EMPTY, errors=("500",))},
    "/subjects/{subject}/versions": {
        "post": op("Register a schema under a subject", ref("SchemaId"), params=[
            SUBJECT_PARAM, query("normalize")], body="RegisterSchemaRequest",
            errors=("422", "500")),
        "get": op("Versions of a subject", INTS, params=[
            SUBJECT_PARAM, query("deleted"), query("deletedOnly"), *PAGING])},
    "/subjects": {"get": op("Subjects", STRINGS, params=[
        query("subjectPrefix", "string"), query("deleted"), query("deletedOnly"), *PAGING],
        errors=("500",))},
    "/subjects/{subject}": {
        "post": op("Look up a schema under a subject", ref("SubjectVersion"), params=[
            SUBJECT_PARAM, query("normalize"), query("deleted")], body="RegisterSchemaRequest"),
        "delete": op("Delete a subject (soft; `permanent=true` after a soft delete)", INTS,
                     params=[SUBJECT_PARAM, {**query("permanent"), "example": True}])},
    "/subjects/{subject}/versions/{version}": {
        "get": op("A version of a subject", ref("SubjectVersion"),
                  params=[*WITH_VERSION, query("deleted")]),
        "delete": op("Delete a version (soft, or `permanent=true`)", {"type": "integer"},
                     params=[*WITH_VERSION, query("permanent")])},
    "/subjects/{subject}/versions/{version}/schema": {
        "get": op("The schema of a version, unwrapped", ref("RawSchema"),
                  params=[*WITH_VERSION, query("deleted")])},
    "/subjects/{subject}/versions/{version}/referencedby": {
        "get": op("Ids of schemas that reference this version", INTS,
                  params=[*WITH_VERSION, *PAGING])},
    "/schemas": {"get": op("Schemas", array(ref("SubjectVersion")), params=[
        query("subjectPrefix", "string"), query("deleted"), query("latestOnly"), *PAGING],
        errors=("500",))},
    "/schemas/types": {"get": op("Supported schema types", STRINGS, errors=("500",))},
    "/schemas/ids/{id}": {"get": op("A schema by id", ref("Schema"), params=[
        ID_PARAM, query("subject", "string")])},
    "/schemas/ids/{id}/schema": {"get": op("A schema by id, unwrapped", ref("RawSchema"),
                                           params=[ID_PARAM])},
    "/schemas/ids/{id}/subjects": {"get": op("Subjects using a schema", STRINGS, params=[
        ID_PARAM, query("deleted"), *PAGING])},
    "/schemas/ids/{id}/versions": {"get": op(
        "Subject versions using a schema", array(ref("SubjectVersionPair")),
        params=[ID_PARAM, query("deleted"), *PAGING])},
    "/compatibility/subjects/{subject}/versions/{version}": {"post": op(
        "Is a schema compatible with a version?", ref("CompatibilityCheck"),
        params=[*WITH_VERSION, query("verbose"), query("normalize")],
        body="RegisterSchemaRequest")},
    "/compatibility/subjects/{subject}/versions": {"post": op(
        "Is a schema compatible with the subject's versions (per its level)?",
        ref("CompatibilityCheck"), params=[SUBJECT_PARAM, query("verbose"),
                                           query("normalize")], body="RegisterSchemaRequest")},
    "/config": {
        "get": op("Global compatibility level", ref("Config"), errors=("500",)),
        "put": op("Set the global compatibility level", ref("ConfigUpdate"),
                  body="ConfigUpdate", errors=("422", "500")),
        "delete": op("Reset the global level to BACKWARD", ref("Config"), errors=("500",))},
    "/config/{subject}": {
        "put": op("Set a subject's compatibility level", ref("ConfigUpdate"),
                  params=WITH_SUBJECT, body="ConfigUpdate", errors=("422", "500")),
        "get": op("A subject's compatibility level", ref("Config"),
                  params=[SUBJECT_PARAM, query("defaultToGlobal")]),
        "delete": op("Remove a subject's level", ref("Config"), params=WITH_SUBJECT)},
    "/mode": {
        "get": op("Global mode", ref("Mode"), errors=("500",)),
        "put": op("Set the global mode", ref("Mode"), params=[query("force")], body="Mode",
                  errors=("422", "500")),
        "delete": op("Reset the global mode", ref("Mode"), errors=("500",))},
    "/mode/{subject}": {
        "put": op("Set a subject's mode", ref("Mode"), params=[SUBJECT_PARAM, query("force")],
                  body="Mode", errors=("422", "500")),
        "get": op("A subject's mode", ref("Mode"),
                  params=[SUBJECT_PARAM, query("defaultToGlobal")]),
        "delete": op("Remove a subject's mode", ref("Mode"), params=WITH_SUBJECT)},
    "/contexts": {"get": op("Contexts", STRINGS, params=PAGING, errors=("500",))},
}
