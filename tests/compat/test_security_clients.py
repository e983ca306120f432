"""confluent-kafka, kafka-python, aiokafka and kcat authenticate with PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL, and with a client certificate over
SSL (mTLS), each producing a record and reading it back as a user would."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiokafka
import confluent_kafka
import kafka
import pytest
from aiokafka.helpers import create_ssl_context

from brokercore.server import TLS_WRITE_CHUNK
from tests.securebroker import CREDENTIALS, SecuredBroker, start_secured_broker

SASL = [(protocol, mechanism) for protocol in ("SASL_PLAINTEXT", "SASL_SSL")
        for mechanism in CREDENTIALS]
TOPIC = "secured"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    secured = start_secured_broker(tmp_path_factory.mktemp("secured"))
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": secured.bootstrap(
        "PLAINTEXT")})
    admin.create_topics([confluent_kafka.admin.NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    yield secured
    secured.process.stop()


def _confluent_config(broker: SecuredBroker, protocol: str,
                      mechanism: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": broker.bootstrap(protocol),
                              "security.protocol": protocol, "ssl.ca.location": broker.ca_file}
    if mechanism is not None:
        user, password = CREDENTIALS[mechanism]
        config.update({"sasl.mechanism": mechanism, "sasl.username": user,
                       "sasl.password": password})
    else:
        config.update({"ssl.certificate.location": str(broker.client.cert),
                       "ssl.key.location": str(broker.client.key)})
    return config


def _confluent_roundtrip(config: dict[str, Any], value: bytes) -> bytes:
    producer = confluent_kafka.Producer(config)
    delivered: list[Any] = []
    producer.produce(TOPIC, value, on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert producer.flush(20) == 0
    error, message = delivered[0]
    assert error is None
    consumer = confluent_kafka.Consumer({**config, "group.id": "unused",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, message.offset())])
    try:
        read = consumer.poll(20)
        assert read is not None and read.error() is None
        return bytes(read.value())
    finally:
        consumer.close()


def _kafka_python_config(broker: SecuredBroker, protocol: str,
                         mechanism: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap_servers": broker.bootstrap(protocol),
                              "security_protocol": protocol, "ssl_cafile": broker.ca_file}
    if mechanism is not None:
        user, password = CREDENTIALS[mechanism]
        config.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                       "sasl_plain_password": password})
    else:
        config.update({"ssl_certfile": str(broker.client.cert),
                       "ssl_keyfile": str(broker.client.key)})
    return config


def _kafka_python_roundtrip(config: dict[str, Any], value: bytes) -> bytes:
    producer = kafka.KafkaProducer(**config)
    offset = producer.send(TOPIC, value).get(20).offset
    producer.close()
    consumer = kafka.KafkaConsumer(**config, enable_auto_commit=False)
    partition = kafka.TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek(partition, offset)
    try:
        records = consumer.poll(timeout_ms=20_000, max_records=1)
        return bytes(records[partition][0].value)
    finally:
        consumer.close()


def _aiokafka_config(broker: SecuredBroker, protocol: str,
                     mechanism: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap_servers": broker.bootstrap(protocol),
                              "security_protocol": protocol}
    if protocol != "SASL_PLAINTEXT":
        certificate = {} if mechanism else {"certfile": str(broker.client.cert),
                                            "keyfile": str(broker.client.key)}
        config["ssl_context"] = create_ssl_context(cafile=broker.ca_file, **certificate)
    if mechanism is not None:
        user, password = CREDENTIALS[mechanism]
        config.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                       "sasl_plain_password": password})
    return config


async def _aiokafka_roundtrip_async(config: dict[str, Any], value: bytes) -> bytes:
    producer = aiokafka.AIOKafkaProducer(**config)
    await producer.start()
    try:
        offset = (await producer.send_and_wait(TOPIC, value)).offset
    finally:
        await producer.stop()
    consumer = aiokafka.AIOKafkaConsumer(**config, enable_auto_commit=False)
    await consumer.start()
    partition = aiokafka.TopicPartition(TOPIC, 0)
    try:
        consumer.assign([partition])
        consumer.seek(partition, offset)
        record = await asyncio.wait_for(consumer.getone(), 20)
        return bytes(record.value or b"")
    finally:
        await consumer.stop()


def _aiokafka_roundtrip(config: dict[str, Any], value: bytes) -> bytes:
    return asyncio.run(_aiokafka_roundtrip_async(config, value))


CLIENTS = {
    "confluent-kafka": (_confluent_config, _confluent_roundtrip),
    "kafka-python": (_kafka_python_config, _kafka_python_roundtrip),
    "aiokafka": (_aiokafka_config, _aiokafka_roundtrip),
}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol, mechanism", SASL)
def test_each_client_authenticates_with_each_mechanism(
        broker: SecuredBroker, client: str, protocol: str, mechanism: str) -> None:
    configure, roundtrip = CLIENTS[client]
    value = uuid.uuid4().bytes
    assert roundtrip(configure(broker, protocol, mechanism), value) == value


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_authenticates_with_a_client_certificate(
        broker: SecuredBroker, client: str) -> None:
    configure, roundtrip = CLIENTS[client]
    value = uuid.uuid4().bytes
    assert roundtrip(configure(broker, "SSL", None), value) == value


def _kcat(config: dict[str, Any], *args: str, stdin: bytes | None = None) -> bytes:
    options = [item for key, value in config.items() if key != "bootstrap.servers"
               for item in ("-X", f"{key}={value}")]
    done = subprocess.run(["kcat", "-b", config["bootstrap.servers"], *options, *args],
                          input=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


@pytest.mark.parametrize("protocol, mechanism", [("SASL_SSL", "SCRAM-SHA-512"),
                                                 ("SASL_PLAINTEXT", "PLAIN"), ("SSL", None)])
def test_kcat_produces_and_consumes_on_a_secured_listener(
        broker: SecuredBroker, protocol: str, mechanism: str | None, tmp_path: Path) -> None:
    config = _confluent_config(broker, protocol, mechanism)
    value = uuid.uuid4().hex
    _kcat(config, "-P", "-t", TOPIC, stdin=value.encode())
    out = _kcat(config, "-C", "-t", TOPIC, "-o", "-1", "-c", "1", "-J", "-e")
    assert json.loads(out.splitlines()[0])["payload"] == value


def test_a_wrong_password_is_refused_with_kafkas_error(broker: SecuredBroker) -> None:
    errors: list[confluent_kafka.KafkaError] = []
    config = {**_confluent_config(broker, "SASL_SSL", "SCRAM-SHA-256"),
              "sasl.password": "wrong", "error_cb": errors.append}
    producer = confluent_kafka.Producer(config)
    for _ in range(50):
        producer.poll(0.2)
        if any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors):
            break
    failure = next(e for e in errors if e.code() == confluent_kafka.KafkaError._AUTHENTICATION)
    assert "Invalid user credentials" in failure.str()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_record_larger_than_a_tls_write_slice_arrives_whole(
        broker: SecuredBroker, client: str) -> None:
    """The broker hands responses to TLS in slices (`TLS_WRITE_CHUNK`): a fetch response
    several slices long must reach each client's TLS reader byte for byte."""
    make_config, roundtrip = CLIENTS[client]
    value = os.urandom(3 * TLS_WRITE_CHUNK + 12_345)
    assert roundtrip(make_config(broker, "SASL_SSL", "SCRAM-SHA-512"), value) == value
