"""HTTP Basic over real HTTP: the platform's web server started with `MILLRACE_HTTP_AUTH=1`
in its environment (the switch `platform --secure` sets), in front of a broker with SASL;
confluent-kafka's own schema registry client with and without `basic.auth.user.info`."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.registry.live import registry_servers
from tests.securebroker import SCRAM_USERS, start_secured_broker

USER, PASSWORD = SCRAM_USERS["SCRAM-SHA-512"]
SERVER_ENV: dict[str, str] = {}  # the server's environment, for the in-process proxy
SCHEMA = json.dumps({"type": "record", "name": "User",
                     "fields": [{"name": "name", "type": "string"}]})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("realhttp")
    broker = start_secured_broker(data / "broker")
    env: dict[str, Any] = {
        "MILLRACE_HTTP_AUTH": "1",
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap("PLAINTEXT"),
        "MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS": broker.bootstrap("SASL_PLAINTEXT"),
    }
    SERVER_ENV.update(env)
    try:
        with registry_servers(f"sqlite:///{data / 'registry.sqlite3'}", data,
                              extra_env=env) as (url,):
            yield url
    finally:
        broker.process.stop()


def test_confluent_s_client_with_basic_auth_registers_and_reads(server: str) -> None:
    client = SchemaRegistryClient({"url": server,
                                   "basic.auth.user.info": f"{USER}:{PASSWORD}"})
    schema_id = client.register_schema("users-value", Schema(SCHEMA, "AVRO"))
    assert json.loads(client.get_schema(schema_id).schema_str)["name"] == "User"
    assert "users-value" in client.get_subjects()


@pytest.mark.parametrize("credentials", [None, f"{USER}:wrong", "nobody:secret"])
def test_confluent_s_client_without_valid_credentials_gets_40101(
        server: str, credentials: str | None) -> None:
    config = {"url": server}
    if credentials:
        config["basic.auth.user.info"] = credentials
    with pytest.raises(SchemaRegistryError) as refused:
        SchemaRegistryClient(config).get_subjects()
    assert refused.value.http_status_code == 401
    assert refused.value.error_code == 40101


@pytest.mark.parametrize("header", ["Basic %%%", "Basic " + base64.b64encode(b"x").decode(),
                                    "Digest x"])
def test_malformed_headers_are_401_over_the_wire(server: str, header: str) -> None:
    for path in ("/subjects", "/schemas/ids/1"):  # Django's path and the fast lane's
        response = httpx.get(server + path, headers={"Authorization": header})
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == 'Basic realm="millrace"'
        assert response.json()["error_code"] == 40101


def test_the_proxy_asks_the_registry_as_its_caller(server: str, transactional_db: None,
                                                   settings: Any) -> None:
    """An Avro produce through the REST proxy (in process, auth on) registers its schema in
    the secured registry with the caller's credentials."""
    from asgiref.sync import async_to_sync

    import httpauth
    from millrace.asgi import application
    from restproxy import client as proxy_client
    from restproxy import schemas

    settings.MILLRACE_HTTP_AUTH = True
    settings.SCHEMA_REGISTRY_URL = server
    settings.KAFKA_BOOTSTRAP_SERVERS = SERVER_ENV["KAFKA_BOOTSTRAP_SERVERS"]
    settings.MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS = SERVER_ENV[
        "MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS"]
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": SERVER_ENV["KAFKA_BOOTSTRAP_SERVERS"]})
    admin.create_topics([NewTopic("avro-users", 1, 1)])["avro-users"].result(15)
    schemas.reset_registry()
    proxy_client.reset_gateway()
    httpauth.verified.clear()
    body = {"value_schema": SCHEMA, "records": [{"value": {"name": "ada"}}]}

    async def produce(user: str, password: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post("/kafka/topics/avro-users", content=json.dumps(body), headers={
                "Authorization": f"Basic {token}",
                "Content-Type": "application/vnd.kafka.avro.v2+json"})

    try:
        produced = async_to_sync(produce)(USER, PASSWORD)
        assert produced.status_code == 200, produced.content
        assert produced.json()["offsets"][0]["error_code"] is None
        registered = SchemaRegistryClient({"url": server,
                                           "basic.auth.user.info": f"{USER}:{PASSWORD}"})
        assert "avro-users-value" in registered.get_subjects()
    finally:
        schemas.reset_registry()
        proxy_client.reset_gateway()


@pytest.fixture(scope="module")
def https_server(server: str, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[str, str]]:
    """(URL, CA file) of a registry as `platform --secure` serves it: HTTPS with the
    platform's own certificate, HTTP Basic against the module's broker's SCRAM users."""
    from millrace.secure import SecureFiles

    data = tmp_path_factory.mktemp("realhttps")
    files = SecureFiles.ensure(data)
    with registry_servers(f"sqlite:///{data / 'registry.sqlite3'}", data, extra_env=SERVER_ENV,
                          tls=(files.http_keystore, files.ca_file)) as (url,):
        yield url, str(files.ca_file)


def test_sparkkafka_decodes_through_an_https_registry_with_basic_auth(
        https_server: tuple[str, str]) -> None:
    """The Data Source's `schema.registry.*` options (Confluent's client keys) reach a
    registry behind HTTPS and HTTP Basic: the decoder settled on the driver, and the one an
    executor unpickles, read a record; without the login or the CA the read is refused in
    the registry's words. No Spark session: the decoder is what a task runs."""
    import pickle
    import struct

    import fastavro

    from sparkkafka.options import parse_options
    from sparkkafka.schema_registry import SchemaError
    from sparkkafka.source import registry_decoders

    url, ca = https_server
    client = SchemaRegistryClient({"url": url, "ssl.ca.location": ca,
                                   "basic.auth.user.info": f"{USER}:{PASSWORD}"})
    schema_id = client.register_schema("secure-users-value", Schema(SCHEMA, "AVRO"))
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(json.loads(SCHEMA)), {"name": "ada"})
    record = b"\0" + struct.pack(">I", schema_id) + body.getvalue()
    options = {"kafka.bootstrap.servers": SERVER_ENV["KAFKA_BOOTSTRAP_SERVERS"],
               "subscribe": "secure-users", "valueFormat": "avro",
               "schema.registry.url": url, "schema.registry.ssl.ca.location": ca,
               "schema.registry.basic.auth.user.info": f"{USER}:{PASSWORD}"}
    decoder = registry_decoders(parse_options(options))["value"]
    assert decoder(record) == ("ada",)  # the row of the record struct
    shipped = pickle.loads(pickle.dumps(decoder))  # a fresh client on the executor
    assert shipped(record) == ("ada",)

    wrong = {**options, "schema.registry.basic.auth.user.info": f"{USER}:wrong"}
    with pytest.raises(SchemaError, match=r"HTTP 401.*40101"):
        registry_decoders(parse_options(wrong))
    untrusted = {k: v for k, v in options.items() if k != "schema.registry.ssl.ca.location"}
    with pytest.raises(SchemaError, match=r"unreachable.*CERTIFICATE_VERIFY_FAILED"):
        registry_decoders(parse_options(untrusted))


def test_the_stream_views_find_the_schema_in_the_https_registry(
        https_server: tuple[str, str]) -> None:
    """`views.latest_schema_type`, which decides whether a topic's view gets decoded
    columns, asks with the login and CA of `Source.registry()`; without them the topic
    would silently read as undecoded bytes."""
    from controlcenter.streams import views

    url, ca = https_server
    client = SchemaRegistryClient({"url": url, "ssl.ca.location": ca,
                                   "basic.auth.user.info": f"{USER}:{PASSWORD}"})
    client.register_schema("views-users-value", Schema(SCHEMA, "AVRO"))
    source = views.Source("unused:9092", url, {}, {"basic.auth.user.info": f"{USER}:{PASSWORD}",
                                                   "ssl.ca.location": ca})
    assert views.latest_schema_type(source.registry(), "views-users-value") == "AVRO"
    assert views.latest_schema_type({"url": url, "ssl.ca.location": ca},
                                    "views-users-value") is None  # 401
