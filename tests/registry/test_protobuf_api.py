"""Protobuf subjects over the HTTP API: text and descriptors, imports, formats, the levels."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from .conftest import Api
from .test_http_api import error

ADDRESS = 'syntax = "proto3";\npackage common;\nmessage Address { string street = 1; }\n'
ORDER = """syntax = "proto3";
package shop;
import "common/address.proto";
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  common.Address ship_to = 2;
  google.protobuf.Timestamp at = 3;
  map<string, int64> quantities = 4;
  oneof payment { string card = 5; int32 cash_cents = 6; }
}
message Note { string text = 1; }
"""
LEGACY = """syntax = "proto2";
message Legacy {
  required int32 id = 1;
  optional string label = 2 [default = "none"];
  repeated int32 codes = 3 [packed = true];
  extensions 100 to 199;
}
"""


def register(api: Api, subject: str, text: str, **extra: Any) -> Any:
    return api.register(subject, text, schemaType="PROTOBUF", **extra)


def descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    found = descriptor_pb2.FileDescriptorProto()
    found.ParseFromString(base64.b64decode(text))
    return found


def test_text_and_descriptor_forms_of_one_schema_get_one_id(api: Api) -> None:
    assert register(api, "common/address.proto", ADDRESS).body == {"id": 1}
    refs = [{"name": "common/address.proto", "subject": "common/address.proto", "version": 1}]
    assert register(api, "orders-value", ORDER, references=refs).body == {"id": 2}
    body = api.get("/schemas/ids/2").body
    assert body["schemaType"] == "PROTOBUF" and body["references"] == refs
    assert "message Order {" in body["schema"] and "map<string, int64> quantities = 4;" in body[
        "schema"]
    serialized = api.get("/schemas/ids/2?format=serialized").body["schema"]
    file = descriptor(serialized)
    assert [m.name for m in file.message_type] == ["Order", "Note"]  # message indexes hold
    assert list(file.dependency) == ["common/address.proto", "google/protobuf/timestamp.proto"]
    # What confluent-kafka's serializer sends (a base64 descriptor) is the same schema.
    assert register(api, "orders-value", serialized, references=refs).body == {"id": 2}
    looked_up = api.post("/subjects/orders-value",
                         {"schema": serialized, "schemaType": "PROTOBUF", "references": refs})
    assert looked_up.body["id"] == 2
    version = api.get("/subjects/orders-value/versions/1?format=serialized").body
    assert version["schema"] == serialized
    raw = api.client.get("/schema-registry/subjects/orders-value/versions/1/schema")
    assert raw.content.decode() == body["schema"]  # the text itself, as Confluent answers
    # The stored text compiles back to the same text.
    assert register(api, "again", body["schema"], references=refs).body == {"id": 2}


def test_proto2_text_keeps_labels_defaults_and_extensions(api: Api) -> None:
    assert register(api, "legacy", LEGACY).body == {"id": 1}
    text = api.get("/schemas/ids/1").body["schema"]
    for line in ('required int32 id = 1;', 'optional string label = 2 [default = "none"];',
                 "repeated int32 codes = 3 [packed = true];", "extensions 100 to 199;"):
        assert line in text
    assert register(api, "legacy", text).body == {"id": 1}


@pytest.mark.parametrize("schema", [
    "message {",
    'syntax = "proto3"; message A { Unknown u = 1; }',
    'syntax = "proto3"; import "nowhere.proto"; message A { }',
    'syntax = "proto3"; message A { int32 a = 1; int32 b = 1; }',
    "",
    'syntax = "proto3"; import "../escape.proto"; message A { }',
    'syntax = "proto3"; import "grpc_tools/protoc.py"; message A { }',
    'edition = "2023"; message A { int32 a = 1; }',
    "AAAA",  # base64 of bytes that are no FileDescriptorProto
    base64.b64encode(b"\x0a\x01").decode(),
])
def test_it_refuses_what_does_not_compile_with_42201_and_stores_nothing(api: Api, schema: str
                                                                        ) -> None:
    error(register(api, "bad", schema), 422, 42201)
    error(api.get("/subjects/bad/versions"), 404, 40401)


def test_a_descriptor_naming_an_import_without_a_reference_is_refused(api: Api) -> None:
    file = descriptor_pb2.FileDescriptorProto(name="a.proto", syntax="proto3",
                                              dependency=["common/address.proto"])
    message = file.message_type.add(name="A")
    message.field.add(name="home", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                      type_name=".common.Address")
    error(register(api, "a", base64.b64encode(file.SerializeToString()).decode()), 422, 42201)


PAYMENT = """syntax = "proto3";
package shop;
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";
message Payment {
  confluent.type.Decimal amount = 1 [(confluent.field_meta).params = { key: "scale", value: "2" }];
  google.type.Date day = 2;
}
"""


def test_confluents_decimal_and_field_meta_are_built_in_and_their_options_kept(api: Api
                                                                               ) -> None:
    """What Confluent's Connect converter registers for a Decimal: no reference for the
    imports, and the scale in `(confluent.field_meta)`, which the stored text and the
    serialized descriptor both keep (the converter reads the scale from it)."""
    schema_id = register(api, "payments-value", PAYMENT).body["id"]
    text = api.get(f"/schemas/ids/{schema_id}").body["schema"]
    assert ('.confluent.type.Decimal amount = 1 [(confluent.field_meta) = '
            '{ params { key: "scale" value: "2" } }];') in text
    serialized = api.get(f"/schemas/ids/{schema_id}?format=serialized").body["schema"]
    file = descriptor(serialized)
    assert list(file.dependency) == ["confluent/meta.proto", "confluent/type/decimal.proto",
                                     "google/type/date.proto"]
    options = file.message_type[0].field[0].options.SerializeToString()
    # Field 1088 (field_meta), a Meta of 12 bytes: params (2), an entry of 10: key, value.
    assert options == b"\x82\x44\x0c" + b"\x12\x0a" + b"\x0a\x05scale" + b"\x12\x012"
    assert register(api, "payments-value", serialized).body == {"id": schema_id}  # as sent
    error(register(api, "bad", PAYMENT.replace("confluent.type.Decimal", "confluent.Decimal")),
          422, 42201)


@pytest.mark.parametrize(("old", "new", "compatible", "rule"), [
    ("string a = 1;", "string b = 1;", True, None),
    ("int32 a = 1;", "int64 a = 1;", True, None),
    ("int32 a = 1;", "string a = 1;", False, "FIELD_SCALAR_KIND_CHANGED"),
    ("sint32 a = 1;", "int32 a = 1;", False, "FIELD_SCALAR_KIND_CHANGED"),
    ("string a = 1;", "repeated string a = 1;", True, None),
    ("int32 a = 1;", "repeated int32 a = 1;", False, "FIELD_NUMERIC_LABEL_CHANGED"),
    ("string a = 1;", "string a = 1; int32 b = 2;", True, None),
    ("string a = 1; int32 b = 2;", "string a = 1;", True, None),
    ("string a = 1; int32 b = 2;", "oneof o { string a = 1; int32 b = 2; }", False,
     "MULTIPLE_FIELDS_MOVED_TO_ONEOF"),
    ("oneof o { string a = 1; int32 b = 2; }", "oneof o { string a = 1; }", False,
     "ONEOF_FIELD_REMOVED"),
    ("Inner a = 1; message Inner { }", "string a = 1; message Inner { }", False,
     "FIELD_KIND_CHANGED"),
])
def test_backward_levels_follow_the_protobuf_rules(
    api: Api, old: str, new: str, compatible: bool, rule: str | None
) -> None:
    register(api, "m", f'syntax = "proto3";\nmessage M {{ {old} }}\n')
    check = api.post("/compatibility/subjects/m/versions/latest?verbose=true",
                     {"schema": f'syntax = "proto3";\nmessage M {{ {new} }}\n',
                      "schemaType": "PROTOBUF"})
    assert check.body["is_compatible"] is compatible, check.body
    if rule:
        assert any(rule in message and "#/M" in message for message in check.body["messages"])


def test_a_removed_message_is_incompatible_and_a_changed_package_is_not(api: Api) -> None:
    register(api, "p", 'syntax = "proto3";\npackage a;\nmessage A { }\nmessage B { }\n')
    moved = {"schema": 'syntax = "proto3";\npackage b;\nmessage A { }\nmessage B { }\n',
             "schemaType": "PROTOBUF"}
    assert api.post("/compatibility/subjects/p/versions/latest", moved).body == {
        "is_compatible": True}
    removed = {"schema": 'syntax = "proto3";\npackage a;\nmessage A { }\n',
               "schemaType": "PROTOBUF"}
    assert api.post("/compatibility/subjects/p/versions/latest", removed).body == {
        "is_compatible": False}


@pytest.mark.parametrize("name", ["", "../up.proto", "/abs.proto", "dir/"])
def test_a_reference_name_that_is_no_relative_path_is_refused(api: Api, name: str) -> None:
    assert register(api, "dep", ADDRESS).body == {"id": 1}
    refs = [{"name": name, "subject": "dep", "version": 1}]
    text = 'syntax = "proto3";\nmessage A { string a = 1; }\n'
    error(register(api, "uses-dep", text, references=refs), 422, 42201)


def test_an_import_may_be_named_like_the_schema_file_itself(api: Api) -> None:
    register(api, "schema.proto", ADDRESS)
    refs = [{"name": "schema.proto", "subject": "schema.proto", "version": 1}]
    text = ('syntax = "proto3";\nimport "schema.proto";\n'
            "message A { common.Address home = 1; }\n")
    assert register(api, "a", text, references=refs).body == {"id": 2}
