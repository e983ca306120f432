"""Confluent's registry-backed converters in a worker process, against the platform's own
schema registry, REST proxy and control center served over real HTTP (Daphne, the test
database): datagen writes Avro that the REST proxy's v2 consumer and the message browser
decode; JSON Schema and Protobuf go from datagen through a topic into a FileStreamSink;
an undecodable record fails its task, or goes to the DLQ when tolerated. Connect's logical
types: what confluent-kafka's AvroSerializer writes for a decimal, date, time and timestamp
reads as Connect's Decimal, Date, Time and Timestamp, and goes back in bytes Confluent's
deserializer reads; JSON Schema writes them with Confluent's annotations; Protobuf writes
them as Confluent's messages, which a sink task in the worker and confluent-kafka's
ProtobufDeserializer read back."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import Producer
from django.core.management import call_command
from django.test import override_settings

from connect import logical
from connect.api import Schema
from tests.connect.workers import WorkerProcess, read_topic, wait_for
from tests.controlcenter.browser import LiveServer, serve

DATAGEN = "io.confluent.kafka.connect.datagen.DatagenConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
CONVERTERS = {
    "avro": "io.confluent.connect.avro.AvroConverter",
    "jsonschema": "io.confluent.connect.json.JsonSchemaConverter",
    "protobuf": "io.confluent.connect.protobuf.ProtobufConverter",
}
V2 = "application/vnd.kafka.v2+json"


@pytest.fixture(scope="module")
def app_server(django_db_setup: None, django_db_blocker: Any, kafka_bootstrap: str
               ) -> Iterator[LiveServer]:
    """The platform's app; its REST proxy asks the registry of a first server over HTTP, as
    it does in production (SCHEMA_REGISTRY_URL, never in-process). The tests use no
    transactional_db: its flush after each test would restart the registry's ids, which the
    worker has cached as a client does (ids never change in a registry)."""
    with django_db_blocker.unblock():
        call_command("migrate", verbosity=0)
    with django_db_blocker.unblock(), override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap), \
            serve("millrace.asgi:application") as registry, \
            serve("millrace.asgi:application",
                  SCHEMA_REGISTRY_URL=f"{registry.url}/schema-registry") as server:
        yield server
    # The servers wrote to the worker's test database outside any test's transaction: a
    # later file on this worker (the registry's, which counts ids from 1) would find them.
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    group = f"connect-sr-{uuid.uuid4().hex[:8]}"
    proc = WorkerProcess(tmp_path_factory.mktemp("connect-sr"), kafka_bootstrap, group)
    proc.start()
    yield proc
    proc.stop()


def _registry(server: LiveServer) -> str:
    return f"{server.url}/schema-registry"


def _create(worker: WorkerProcess, config: dict[str, str]) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    answer = worker.request("POST", "/connectors", {"name": name, "config": config})
    assert answer.status_code == 201, answer.text
    return name


def _datagen(worker: WorkerProcess, server: LiveServer, fmt: str, topic: str,
             quickstart: str = "users", iterations: int = 10, key_fmt: str | None = None,
             **extra: str) -> str:
    keys = {"key.converter": CONVERTERS[key_fmt],
            "key.converter.schema.registry.url": _registry(server)} if key_fmt else {}
    return _create(worker, {
        "connector.class": DATAGEN, "kafka.topic": topic, "quickstart": quickstart,
        "iterations": str(iterations), "max.interval": "0", "random.seed": "7",
        "value.converter": CONVERTERS[fmt],
        "value.converter.schema.registry.url": _registry(server), **keys, **extra})


def _task_state(worker: WorkerProcess, name: str) -> dict[str, Any] | None:
    answer = worker.get(f"/connectors/{name}/status")
    tasks = answer.json().get("tasks") if answer.status_code == 200 else None
    return tasks[0] if tasks else None


def test_datagen_avro_is_decoded_by_the_rest_proxy_and_the_message_browser(
        worker: WorkerProcess, app_server: LiveServer, kafka_bootstrap: str) -> None:
    topic = f"avro-users-{uuid.uuid4().hex[:6]}"
    _datagen(worker, app_server, "avro", topic, key_fmt="avro")  # the proxy reads both
    raw = read_topic(kafka_bootstrap, topic, 10)
    assert len(raw) == 10 and all(v[0] == 0 for v in raw)  # Confluent's magic byte

    latest = httpx.get(f"{_registry(app_server)}/subjects/{topic}-value/versions/latest").json()
    schema = json.loads(latest["schema"])
    assert (schema["type"], schema["name"], schema["namespace"]) == ("record", "users", "ksql")
    assert int.from_bytes(raw[0][1:5], "big") == latest["id"]
    key_schema = httpx.get(f"{_registry(app_server)}/subjects/{topic}-key/versions/latest")
    assert key_schema.json()["schema"] == '"string"'

    proxy = f"{app_server.url}/kafka"
    group = f"g-{uuid.uuid4().hex[:6]}"
    created = httpx.post(f"{proxy}/consumers/{group}", headers={"Content-Type": V2},
                         json={"format": "avro", "auto.offset.reset": "earliest"}).json()
    instance = created["base_uri"]
    httpx.post(f"{instance}/subscription", headers={"Content-Type": V2}, json={"topics": [topic]})

    def fetched() -> list[Any]:
        got = httpx.get(f"{instance}/records?timeout=1000",
                        headers={"Accept": "application/vnd.kafka.avro.v2+json"}, timeout=30)
        assert got.status_code == 200, got.text
        records.extend(got.json())
        return records if len(records) >= 10 else []
    records: list[Any] = []
    wait_for(fetched, 30, "the REST proxy never gave the datagen records")
    httpx.delete(instance, headers={"Content-Type": V2})
    assert {r["value"]["gender"] for r in records} <= {"MALE", "FEMALE", "OTHER"}
    assert all(r["value"]["userid"] == r["key"] for r in records)

    download = httpx.get(f"{app_server.url}/topics/{topic}/messages/?download=json",
                         timeout=30)
    assert download.status_code == 200, download.text[:500]
    shown = download.json()
    assert len(shown) == 10
    assert {m["value"]["format"] for m in shown} == {m["key"]["format"] for m in shown} == {"avro"}
    assert {m["value"]["schema_id"] for m in shown} == {latest["id"]}
    assert {json.loads(m["value"]["text"])["userid"] for m in shown} == {
        r["value"]["userid"] for r in records}


@pytest.mark.parametrize("fmt", ["jsonschema", "protobuf"])
def test_a_registry_format_round_trips_from_datagen_through_a_sink(
        fmt: str, worker: WorkerProcess, app_server: LiveServer, tmp_path: Path) -> None:
    topic = f"{fmt}-orders-{uuid.uuid4().hex[:6]}"
    _datagen(worker, app_server, fmt, topic, quickstart="orders")
    out = tmp_path / "orders.jsonl"
    _create(worker, {"connector.class": SINK, "topics": topic, "file": str(out),
                     "value.converter": CONVERTERS[fmt],
                     "value.converter.schema.registry.url": _registry(app_server)})

    def lines() -> list[dict[str, Any]]:
        got = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
        return got if len(got) >= 10 else []
    orders = wait_for(lines, 60, f"the sink wrote no orders:\n{worker.log()}")
    assert [o["orderid"] for o in orders] == list(range(1, 11))
    assert all(o["address"]["city"].startswith("City_") for o in orders)
    assert all(isinstance(o["orderunits"], float) for o in orders)
    registered = httpx.get(f"{_registry(app_server)}/subjects/{topic}-value/versions/latest")
    assert registered.json()["schemaType"] == {"jsonschema": "JSON", "protobuf": "PROTOBUF"}[fmt]

    download = httpx.get(f"{app_server.url}/topics/{topic}/messages/?download=json", timeout=30)
    assert {m["value"]["format"] for m in download.json()} == {fmt}


def test_an_undecodable_record_fails_the_task_or_goes_to_the_dlq(
        worker: WorkerProcess, app_server: LiveServer, kafka_bootstrap: str,
        tmp_path: Path) -> None:
    topic = f"avro-mixed-{uuid.uuid4().hex[:6]}"
    _datagen(worker, app_server, "avro", topic, iterations=3)
    read_topic(kafka_bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(topic, b"not avro at all")
    producer.flush(10)
    avro = {"value.converter": CONVERTERS["avro"],
            "value.converter.schema.registry.url": _registry(app_server)}

    strict = _create(worker, {"connector.class": SINK, "topics": topic,
                              "file": str(tmp_path / "strict.txt"), **avro})
    failed = wait_for(lambda: (t := _task_state(worker, strict)) and t["state"] == "FAILED"
                      and t, 60, "the strict sink never failed")
    assert "Unknown magic byte" in failed["trace"]

    dlq = f"dlq-{topic}"
    out = tmp_path / "tolerant.txt"
    _create(worker, {"connector.class": SINK, "topics": topic, "file": str(out),
                     "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                     "errors.deadletterqueue.topic.replication.factor": "1",
                     "errors.deadletterqueue.context.headers.enable": "true", **avro})
    assert read_topic(kafka_bootstrap, dlq, 1) == [b"not avro at all"]
    wait_for(lambda: out.exists() and len(out.read_text().splitlines()) == 3, 30,
             "the tolerant sink did not write the three good records")


def test_use_latest_version_writes_with_the_subjects_schema_and_lookups_fail_unregistered(
        worker: WorkerProcess, app_server: LiveServer, kafka_bootstrap: str) -> None:
    topic = f"avro-latest-{uuid.uuid4().hex[:6]}"
    users = {"type": "record", "name": "users", "namespace": "ksql", "fields": [
        {"name": "registertime", "type": "long"}, {"name": "userid", "type": "string"},
        {"name": "regionid", "type": "string"}, {"name": "gender", "type": "string"},
        {"name": "source", "type": "string", "default": "datagen"}]}
    registered = httpx.post(f"{_registry(app_server)}/subjects/{topic}-value/versions",
                            json={"schema": json.dumps(users)}).json()["id"]
    latest = {"value.converter.auto.register.schemas": "false",
              "value.converter.use.latest.version": "true"}
    _datagen(worker, app_server, "avro", topic, iterations=3, **latest)
    raw = read_topic(kafka_bootstrap, topic, 3)
    assert {int.from_bytes(v[1:5], "big") for v in raw} == {registered}
    parsed = fastavro.parse_schema(users)
    decoded: list[Any] = [fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed, None)
                          for v in raw]
    assert {d["source"] for d in decoded} == {"datagen"}  # the field's default
    versions = httpx.get(f"{_registry(app_server)}/subjects/{topic}-value/versions").json()
    assert versions == [1]  # nothing registered by the worker

    unregistered = f"avro-unregistered-{uuid.uuid4().hex[:6]}"
    name = _datagen(worker, app_server, "avro", unregistered, iterations=3,
                    **{"value.converter.auto.register.schemas": "false"})
    failed = wait_for(lambda: (t := _task_state(worker, name)) and t["state"] == "FAILED"
                      and t, 60, "a lookup of an unregistered schema did not fail the task")
    assert "40401" in failed["trace"]  # the registry's subject-not-found, in its words


LOGICAL_AVRO = {"type": "record", "name": "payment", "namespace": "shop", "fields": [
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
PAYMENT = {"amount": decimal.Decimal("-1234567.89"), "day": dt.date(2024, 2, 29),
           "at": dt.time(23, 59, 58, 999000),
           "ts": dt.datetime(2024, 2, 29, 12, 30, 1, 250000, tzinfo=dt.UTC)}


def _converter(cls: Any, server: LiveServer) -> Any:
    converter = cls()
    converter.configure({"schema.registry.url": _registry(server)}, False)
    return converter


def test_confluents_avro_serializers_logical_types_read_as_connects_and_go_back(
        app_server: LiveServer) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from connect.converters.avro import AvroConverter

    topic = f"avro-logical-{uuid.uuid4().hex[:6]}"
    context = SerializationContext(topic, MessageField.VALUE)
    client = SchemaRegistryClient({"url": _registry(app_server)})
    written = AvroSerializer(client, json.dumps(LOGICAL_AVRO))(PAYMENT, context)
    assert written is not None

    converter = _converter(AvroConverter, app_server)
    schema, value = converter.to_connect_data(topic, written)
    assert value == PAYMENT
    assert schema is not None and schema.name == "shop.payment"
    fields = dict(schema.fields)
    assert fields["amount"] == logical.decimal_schema(
        2, extra=(("connect.decimal.precision", "10"),))  # as AvroData reads a plain writer
    assert (fields["day"], fields["at"], fields["ts"]) == (
        logical.date_schema(), logical.time_schema(), logical.timestamp_schema())

    # Written back by the converter: Confluent's annotations, and Confluent's reader agrees.
    again = converter.from_connect_data(topic, schema, value)
    assert again is not None
    latest = httpx.get(f"{_registry(app_server)}/subjects/{topic}-value/versions/latest").json()
    amount = next(f["type"] for f in json.loads(latest["schema"])["fields"]
                  if f["name"] == "amount")
    assert amount == {"type": "bytes", "scale": 2, "precision": 10, "connect.version": 1,
                      "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
                      "connect.name": "org.apache.kafka.connect.data.Decimal",
                      "logicalType": "decimal"}
    assert AvroDeserializer(client)(again, context) == PAYMENT
    assert converter.to_connect_data(topic, again) == (schema, value)


def test_json_schema_writes_logical_types_with_connects_annotations_and_reads_them_back(
        app_server: LiveServer) -> None:
    from connect.converters.jsonschema import JsonSchemaConverter

    topic = f"json-logical-{uuid.uuid4().hex[:6]}"
    schema = Schema("struct", name="shop.payment", fields=(
        ("amount", logical.decimal_schema(2)), ("day", logical.date_schema()),
        ("at", logical.time_schema()), ("ts", logical.timestamp_schema(optional=True)),
        ("ratio", Schema("float64"))))
    value = {**PAYMENT, "ratio": 0.25}
    converter = _converter(JsonSchemaConverter, app_server)
    data = converter.from_connect_data(topic, schema, value)
    assert data is not None
    assert json.loads(data[5:]) == {"amount": -1234567.89, "day": 19782, "at": 86398999,
                                    "ts": 1709209801250, "ratio": 0.25}
    assert b'"amount":-1234567.89' in data  # a JSON number with every digit
    latest = httpx.get(f"{_registry(app_server)}/subjects/{topic}-value/versions/latest").json()
    properties = json.loads(latest["schema"])["properties"]
    assert properties["amount"] == {
        "type": "number", "connect.type": "bytes", "connect.index": 0, "connect.version": 1,
        "title": "org.apache.kafka.connect.data.Decimal", "connect.parameters": {"scale": "2"}}
    assert properties["day"]["title"] == "org.apache.kafka.connect.data.Date"
    assert properties["day"]["connect.type"] == "int32"
    assert _converter(JsonSchemaConverter, app_server).to_connect_data(topic, data) == (
        schema, value)


def _reader_class(name: str) -> Any:
    """The message a consumer of the payment topic compiles for itself, as protoc would from
    its own .proto (Confluent's and Google's types imported), in a pool of its own."""
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
    from google.type import date_pb2, timeofday_pb2

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/payment_reader.proto", package="shop", syntax="proto3",
        dependency=["confluent/type/decimal.proto", "google/type/date.proto",
                    "google/type/timeofday.proto", "google/protobuf/timestamp.proto"])
    message = file.message_type.add(name=name)
    for number, (field, type_name, label) in enumerate((
            ("amount", ".confluent.type.Decimal", F.LABEL_OPTIONAL),
            ("day", ".google.type.Date", F.LABEL_OPTIONAL),
            ("at", ".google.type.TimeOfDay", F.LABEL_OPTIONAL),
            ("ts", ".google.protobuf.Timestamp", F.LABEL_OPTIONAL),
            ("fees", ".confluent.type.Decimal", F.LABEL_REPEATED)), 1):
        message.field.add(name=field, number=number, type=F.TYPE_MESSAGE,
                          type_name=type_name, label=label)
    pool = descriptor_pool.DescriptorPool()
    for known in (decimal_pb2, date_pb2, timeofday_pb2, timestamp_pb2):
        pool.AddSerializedFile(known.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop.{name}"))


PROTO_PAYMENT = Schema("struct", name="shop.payment", fields=(
    ("amount", logical.decimal_schema(2, extra=(("connect.decimal.precision", "9"),))),
    ("day", logical.date_schema()), ("at", logical.time_schema()),
    ("ts", logical.timestamp_schema(optional=True)),
    ("fees", Schema("array", items=logical.decimal_schema(3)))))


def test_protobuf_writes_logical_types_as_confluent_does_and_confluents_reader_agrees(
        worker: WorkerProcess, app_server: LiveServer, kafka_bootstrap: str,
        tmp_path: Path) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.confluent.type.decimal_utils import (
        from_proto_decimal,
    )
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from connect.converters.protobuf import ProtobufConverter

    topic = f"proto-logical-{uuid.uuid4().hex[:6]}"
    values: list[dict[str, Any]] = [
        {**PAYMENT, "amount": decimal.Decimal("-1234567.8"),
         "fees": [decimal.Decimal("0.125"), decimal.Decimal("-128"), decimal.Decimal(0)]},
        {"amount": decimal.Decimal("0.01"), "day": dt.date(1969, 12, 31),
         "at": dt.time(0, 0), "ts": dt.datetime(1970, 1, 1, tzinfo=dt.UTC), "fees": []},
        {"amount": decimal.Decimal("9999999.99"), "day": dt.date(1, 1, 1),
         "at": dt.time(0, 0, 0, 1000), "ts": None, "fees": []}]
    converter = _converter(ProtobufConverter, app_server)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for value in values:
        producer.produce(topic, converter.from_connect_data(topic, PROTO_PAYMENT, value))
    producer.flush(10)
    del producer
    raw = read_topic(kafka_bootstrap, topic, len(values))
    assert len(raw) == len(values)
    out = tmp_path / "payments.jsonl"  # a sink task in the worker reads them back
    _create(worker, {"connector.class": SINK, "topics": topic, "file": str(out),
                     "value.converter": CONVERTERS["protobuf"],
                     "value.converter.schema.registry.url": _registry(app_server)})

    latest = httpx.get(f"{_registry(app_server)}/subjects/{topic}-value/versions/latest").json()
    assert not latest.get("references")  # every import is built in
    text = latest["schema"]
    for imported in ("confluent/meta.proto", "confluent/type/decimal.proto",
                     "google/type/date.proto", "google/type/timeofday.proto",
                     "google/protobuf/timestamp.proto"):
        assert f'import "{imported}";' in text
    assert ('.confluent.type.Decimal amount = 1 [(confluent.field_meta) = { params { key: '
            '"precision" value: "9" } params { key: "scale" value: "2" } }];') in text

    # A fresh converter, as a sink task would have, reads the values and their schema back.
    schema, value = _converter(ProtobufConverter, app_server).to_connect_data(topic, raw[0])
    assert value == values[0]
    assert schema is not None and dict(schema.fields) == {
        "amount": logical.decimal_schema(2, optional=True,
                                         extra=(("connect.decimal.precision", "9"),)),
        "day": logical.date_schema(optional=True), "at": logical.time_schema(optional=True),
        "ts": logical.timestamp_schema(optional=True),
        "fees": Schema("array", True, items=logical.decimal_schema(3, optional=True))}
    assert [converter.to_connect_data(topic, r)[1] for r in raw] == values

    # confluent-kafka's deserializer builds our schema with its own built-in types and reads.
    client = SchemaRegistryClient({"url": _registry(app_server)})
    deserializer = ProtobufDeserializer(_reader_class("payment"), {}, client)
    context = SerializationContext(topic, MessageField.VALUE)
    read = [deserializer(r, context) for r in raw]
    first = read[0]
    assert from_proto_decimal(first.amount) == decimal.Decimal("-1234567.8")
    assert (first.amount.scale, first.amount.precision) == (2, 9)  # -123456780 at scale 2
    assert [from_proto_decimal(f) for f in first.fees] == values[0]["fees"]
    assert (first.day.year, first.day.month, first.day.day) == (2024, 2, 29)
    assert (first.at.hours, first.at.minutes, first.at.seconds, first.at.nanos) == (
        23, 59, 58, 999_000_000)
    assert first.ts.ToDatetime(dt.UTC) == PAYMENT["ts"]
    assert read[1].HasField("at") and read[1].HasField("ts")  # midnight, the epoch: present
    assert not read[2].HasField("ts")

    def lines() -> list[Any]:
        got = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
        return got if len(got) >= len(values) else []
    at_scale = [{**v, "amount": v["amount"].quantize(decimal.Decimal("0.01")),
                 "fees": [f.quantize(decimal.Decimal("0.001")) for f in v["fees"]]}
                for v in values]  # FileStreamSink writes str() of each: the scale shows
    assert wait_for(lines, 60, f"the sink wrote nothing:\n{worker.log()}") == json.loads(
        json.dumps(at_scale, default=str))

    # And the other way: confluent-kafka's serializer registers its own file (the imports
    # built in, no field options), and the converter reads it, at the message's own scale.
    from confluent_kafka.schema_registry.confluent.type.decimal_utils import to_proto_decimal
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    theirs = f"proto-theirs-{uuid.uuid4().hex[:6]}"
    written = _reader_class("receipt")()
    written.amount.MergeFromString(to_proto_decimal(decimal.Decimal("-0.005")).SerializeToString())
    written.day.year, written.day.month, written.day.day = 2024, 2, 29
    data = ProtobufSerializer(type(written), client)(
        written, SerializationContext(theirs, MessageField.VALUE))
    schema, value = _converter(ProtobufConverter, app_server).to_connect_data(theirs, data)
    assert value == {"amount": decimal.Decimal("-0.005"), "day": dt.date(2024, 2, 29),
                     "at": None, "ts": None, "fees": []}
    assert schema is not None and dict(schema.fields)["amount"] == logical.decimal_schema(
        0, optional=True)  # Confluent's reading of a Decimal field without params


def test_protobuf_refuses_a_decimal_past_its_precision_and_a_value_of_the_wrong_type(
        app_server: LiveServer) -> None:
    from connect.api import DataException
    from connect.converters.protobuf import ProtobufConverter

    topic = f"proto-bad-{uuid.uuid4().hex[:6]}"
    converter = _converter(ProtobufConverter, app_server)
    good = {"amount": decimal.Decimal("1.5"), "day": dt.date(2024, 1, 1),
            "at": dt.time(12), "ts": None, "fees": []}
    for field, bad, message in (
            ("amount", decimal.Decimal("12345678.9"), "10 digits, more than the schema's "
                                                      "precision of 9"),
            ("amount", decimal.Decimal("1.234"), "scale of 3, more than the schema's 2"),
            ("amount", "1.5", "Decimal needs a decimal.Decimal, not str"),
            ("amount", decimal.Decimal("NaN"), "not a finite number"),
            ("day", dt.datetime(2024, 1, 1), "Date cannot hold a value of type datetime"),
            ("at", "noon", "Time cannot hold a value of type str"),
            ("at", 86_400_000, "not a time of day"),
            ("ts", 1.5, "Timestamp cannot hold a value of type float"),
            ("day", 10 ** 7, "out of range")):  # days past the year 9999
        with pytest.raises(DataException, match=f"Field {field}: .*{message}"):
            converter.from_connect_data(topic, PROTO_PAYMENT, {**good, field: bad})
    data = converter.from_connect_data(topic, PROTO_PAYMENT, good)  # still works
    assert data is not None
    # Read: a google.type.Date of month 13 (month = 1 turned into 13 in the bytes).
    day = b"\x08\xe8\x0f\x10\x01\x18\x01"  # year 2024, month 1, day 1
    assert data.count(day) == 1
    with pytest.raises(DataException, match=r"Failed to deserialize Protobuf data.*month"):
        converter.to_connect_data(topic, data.replace(day, b"\x08\xe8\x0f\x10\x0d\x18\x01"))
