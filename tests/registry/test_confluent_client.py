"""The unmodified confluent-kafka SchemaRegistryClient, every method, against our server."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from confluent_kafka.schema_registry import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from confluent_kafka.schema_registry.schema_registry_client import (
    ConfigCompatibilityLevel,
    ServerConfig,
)

from .conftest import field, record


@pytest.fixture
def client(live_registry: list[str]) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": live_registry[0]})


@pytest.fixture
def subject() -> str:
    return f"client/{uuid.uuid4().hex[:8]}-value"  # a "/" to check the raw-path routing


def avro(schema: object, references: list[SchemaReference] | None = None) -> Schema:
    return Schema(json.dumps(schema), "AVRO", references or [])


V1 = record("Order", field("id", "long"))
V2 = record("Order", field("id", "long"), field("note", ["null", "string"], default=None))
BAD = record("Order", field("id", "long"), field("total", "double"))


def test_registration_lookup_and_versions(client: SchemaRegistryClient, subject: str) -> None:
    first = client.register_schema(subject, avro(V1))
    assert client.register_schema(subject, avro(V1)) == first
    full = client.register_schema_full_response(subject, avro(V2), normalize_schemas=True)
    assert full.schema_id != first
    assert client.get_schema(first).schema_str == json.dumps(V1, separators=(",", ":"))
    latest = client.get_latest_version(subject)
    assert isinstance(latest, RegisteredSchema) and latest.version == 2
    assert client.get_version(subject, 1).schema_id == first
    assert client.get_versions(subject) == [1, 2]
    assert client.lookup_schema(subject, avro(V1)).version == 1
    assert subject in client.get_subjects()
    assert subject in client.get_subjects_by_schema_id(first)
    versions = client.get_schema_versions(first)
    assert [(v.subject, v.version) for v in versions] == [(subject, 1)]
    assert client.get_schema_types() == ["JSON", "PROTOBUF", "AVRO"]
    assert "." in client.get_contexts()
    client.clear_latest_caches()
    client.clear_caches()


def test_compatibility_and_config(client: SchemaRegistryClient, subject: str) -> None:
    client.register_schema(subject, avro(V1))
    assert client.test_compatibility(subject, avro(V2)) is True
    assert client.test_compatibility(subject, avro(BAD), verbose=True) is False
    assert client.test_compatibility_all_versions(subject, avro(BAD)) is False
    with pytest.raises(SchemaRegistryError) as incompatible:
        client.register_schema(subject, avro(BAD))
    assert incompatible.value.http_status_code == 409
    assert client.set_compatibility(subject, "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility(subject) == "FULL"
    assert client.get_config(subject).compatibility_level.value == "FULL"
    updated = client.set_config(subject, ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))
    assert updated["compatibility"] == "NONE"
    assert client.delete_config(subject).compatibility_level.value == "NONE"
    assert client.get_compatibility() == "BACKWARD"
    assert client.get_config().compatibility_level.value == "BACKWARD"
    assert client.register_schema(subject, avro(V2)) > 0


def test_modes(client: SchemaRegistryClient, subject: str) -> None:
    assert client.get_global_mode() == "READWRITE"
    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert client.get_mode(subject) == "READONLY"
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, avro(V1))
    assert refused.value.error_code == 42205
    assert client.delete_mode(subject) == "READONLY"
    assert client.update_global_mode("READWRITE") == "READWRITE"
    client.register_schema(subject, avro(V1))


def test_references_and_deletes(client: SchemaRegistryClient, subject: str) -> None:
    address = record("Address", field("city", "string"), namespace="acme")
    client.register_schema(f"{subject}-address", avro(address))
    ref = SchemaReference("acme.Address", f"{subject}-address", 1)
    person = record("Person", field("home", "acme.Address"), namespace="acme")
    person_id = client.register_schema(subject, avro(person, [ref]))
    assert client.get_referenced_by(f"{subject}-address", 1) == [person_id]
    with pytest.raises(SchemaRegistryError) as referenced:
        client.delete_subject(f"{subject}-address")
    assert referenced.value.error_code == 42206
    assert client.get_schema(person_id).references[0].subject == f"{subject}-address"
    assert client.delete_version(subject, 1) == 1
    assert client.delete_version(subject, 1, permanent=True) == 1
    assert client.delete_subject(f"{subject}-address") == [1]
    assert client.delete_subject(f"{subject}-address", permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_versions(f"{subject}-address")
    assert gone.value.error_code == 40401


def test_enterprise_only_methods_get_confluent_errors(client: SchemaRegistryClient) -> None:
    """Metadata, guids and associations are not offered: clients get Confluent's 404."""
    for call in (
        lambda: client.get_schema_by_guid("00000000-0000-0000-0000-000000000000"),
        lambda: client.get_latest_with_metadata("s", {"k": "v"}),
        lambda: client.delete_associations("r"),
        lambda: client.create_association(None),
        lambda: client.get_associations_by_resource_name("r", "ns"),
    ):
        with pytest.raises((SchemaRegistryError, AttributeError, TypeError)) as raised:
            call()  # type: ignore[no-untyped-call]
        if isinstance(raised.value, SchemaRegistryError):
            assert raised.value.http_status_code == 404
    client.close()
    new = SchemaRegistryClient.new_client({"url": client.config()["url"]})
    assert new.get_schema_types() == ["JSON", "PROTOBUF", "AVRO"]


def test_a_permanent_delete_reaches_the_reader_cache_of_every_process(
    live_registry: list[str], subject: str
) -> None:
    one = live_registry[0]
    schema = record(f"Cached{uuid.uuid4().hex[:6]}", field("a", "int"))
    path = f"/subjects/{subject.replace('/', '%2F')}"
    registered = httpx.post(f"{one}{path}/versions", json={"schema": json.dumps(schema)})
    schema_id = registered.json()["id"]
    for url in live_registry:  # both processes cache the schema
        assert httpx.get(f"{url}/schemas/ids/{schema_id}").status_code == 200
    httpx.delete(f"{one}{path}")
    assert httpx.delete(f"{one}{path}?permanent=true").json() == [1]
    for url in live_registry:
        response = httpx.get(f"{url}/schemas/ids/{schema_id}")
        assert response.status_code == 404
        assert response.json() == {"error_code": 40403, "message": f"Schema {schema_id} not found"}
