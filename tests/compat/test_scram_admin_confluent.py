"""confluent-kafka-python's user SCRAM credential calls, as against Kafka: describe, upsert,
delete and Kafka's per-user errors; a new credential logs in at once and a removed one no
longer does; credentials survive a restart and are never stored as passwords."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.securebroker import SecuredBroker, start_secured_broker

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    secured = start_secured_broker(tmp_path_factory.mktemp("scram-admin"))
    yield secured
    secured.process.stop()


@pytest.fixture
def admin(broker: SecuredBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})


def _alter(admin: AdminClient, alterations: list[object]) -> dict[str, object]:
    """Each user's result: None, or the KafkaError code."""
    outcome: dict[str, object] = {}
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        try:
            outcome[user] = future.result(30)
        except confluent_kafka.KafkaException as exc:
            outcome[user] = exc.args[0].code()
    return outcome


def _described(admin: AdminClient, users: list[str]) -> dict[str, object]:
    outcome: dict[str, object] = {}
    for user, future in admin.describe_user_scram_credentials(users).items():
        try:
            description = future.result(30)
            outcome[user] = sorted((info.mechanism, info.iterations)
                                   for info in description.scram_credential_infos)
        except confluent_kafka.KafkaException as exc:
            outcome[user] = exc.args[0].code()
    return outcome


def _logs_in(broker: SecuredBroker, mechanism: str, user: str, password: str) -> bool:
    errors: list[confluent_kafka.KafkaError] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
        "ssl.ca.location": broker.ca_file, "sasl.mechanism": mechanism,
        "sasl.username": user, "sasl.password": password, "error_cb": errors.append})
    for _ in range(40):
        try:
            producer.list_topics(timeout=0.5)
            return True
        except confluent_kafka.KafkaException:
            producer.poll(0)  # serves error_cb
            if any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors):
                return False
    raise AssertionError(f"neither in nor refused: {errors}")


def test_upsert_describe_and_delete_as_kafka_answers_them(admin: AdminClient,
                                                         broker: SecuredBroker) -> None:
    # Under KRaft one request may not name a user twice, so the 256 and 512 upserts of a user
    # go in separate calls, as confluent-kafka-python's own test does.
    assert _alter(admin, [UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(SHA256, 10000), b"carol-256")]) == {"carol": None}
    assert _alter(admin, [UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(SHA512, 4096), b"carol-512", b"some-salt")]) == {
        "carol": None}
    assert _described(admin, ["carol", "nobody"]) == {
        "carol": [(SHA256, 10000), (SHA512, 4096)],
        "nobody": confluent_kafka.KafkaError.RESOURCE_NOT_FOUND}
    every = admin.describe_user_scram_credentials().result(30)
    assert {"carol", "scram256", "scram512"} <= set(every)
    assert _logs_in(broker, "SCRAM-SHA-256", "carol", "carol-256")
    assert _logs_in(broker, "SCRAM-SHA-512", "carol", "carol-512")
    assert _alter(admin, [UserScramCredentialDeletion("carol", SHA256)]) == {"carol": None}
    assert not _logs_in(broker, "SCRAM-SHA-256", "carol", "carol-256")
    assert _logs_in(broker, "SCRAM-SHA-512", "carol", "carol-512")
    assert _described(admin, ["carol"]) == {"carol": [(SHA512, 4096)]}


def test_kafkas_errors_for_each_bad_alteration(admin: AdminClient) -> None:
    assert _alter(admin, [
        UserScramCredentialUpsertion("twice", ScramCredentialInfo(SHA256, 4096), b"a"),
        UserScramCredentialUpsertion("twice", ScramCredentialInfo(SHA512, 4096), b"b"),
        UserScramCredentialUpsertion("few", ScramCredentialInfo(SHA256, 4095), b"a"),
        UserScramCredentialUpsertion("many", ScramCredentialInfo(SHA256, 16385), b"a"),
        UserScramCredentialDeletion("ghost", SHA512),
    ]) == {
        "twice": confluent_kafka.KafkaError.DUPLICATE_RESOURCE,
        "few": confluent_kafka.KafkaError.UNACCEPTABLE_CREDENTIAL,
        "many": confluent_kafka.KafkaError.UNACCEPTABLE_CREDENTIAL,
        "ghost": confluent_kafka.KafkaError.RESOURCE_NOT_FOUND,
    }
    assert _described(admin, ["twice", "few"]) == {
        "twice": confluent_kafka.KafkaError.RESOURCE_NOT_FOUND,
        "few": confluent_kafka.KafkaError.RESOURCE_NOT_FOUND}


def test_credentials_survive_a_restart_and_no_password_is_stored(
        admin: AdminClient, broker: SecuredBroker) -> None:
    assert _alter(admin, [UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(SHA512, 4096), b"dave-password-xyz")]) == {"dave": None}
    broker.process.restart()
    assert _logs_in(broker, "SCRAM-SHA-512", "dave", "dave-password-xyz")
    assert _logs_in(broker, "SCRAM-SHA-256", "scram256", "s256-secret")  # --add-scram's
    stored = b"".join(path.read_bytes() for path in Path(broker.process.data_dir).rglob("*")
                      if path.is_file() and "certs" not in path.parts)
    for password in (b"dave-password-xyz", b"s256-secret", b"s512-secret"):
        assert password not in stored
