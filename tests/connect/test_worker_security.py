"""The Connect worker on a secured cluster: Kafka's connect-distributed security keys become
the librdkafka settings its clients and its group member share, and the member joins its
group over SASL_SSL (PLAIN and SCRAM) against a real broker; a wrong password is a
GroupError at once, not a retry loop. Its REST API with Kafka's BasicAuthSecurityRestExtension
asks HTTP Basic of the cluster's SCRAM users, over HTTPS (`listeners=https://...` with
Kafka's `listeners.https.ssl.*` keys, PEM and PKCS12 keystores), and a follower forwards with
the caller's, checking the leader's certificate against the worker's truststore."""

from __future__ import annotations

import base64
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from connect.config import WorkerConfig
from connect.configdef import ConfigException
from connect.membership import GroupError, GroupMember, Security
from connect.rest_auth import BASIC_AUTH_EXTENSION, BasicAuthConfig
from connect.rest_tls import client_context, https_settings
from tests.connect.workers import WorkerProcess, wait_for
from tests.securebroker import CREDENTIALS, SecuredBroker, start_secured_broker

BASE = {"group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
        "status.storage.topic": "s", "bootstrap.servers": "127.0.0.1:9093"}


def test_kafkas_security_keys_become_librdkafkas() -> None:
    config = WorkerConfig.from_props({
        **BASE, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                            'required username="svc" password="p=w;d";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.crt"})
    assert config.client_settings() == {
        "bootstrap.servers": "127.0.0.1:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN", "sasl.username": "svc", "sasl.password": "p=w;d",
        "ssl.ca.location": "/ca.crt"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    secured = start_secured_broker(tmp_path_factory.mktemp("connect-security"))
    yield secured
    secured.process.stop()


def member(broker: SecuredBroker, mechanism: str, password: str | None = None) -> GroupMember:
    user, right = CREDENTIALS[mechanism]
    security = Security.from_client_settings({
        "security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism, "sasl.username": user,
        "sasl.password": right if password is None else password,
        "ssl.ca.location": broker.ca_file})
    return GroupMember(broker.bootstrap("SASL_SSL"), f"connect-{mechanism}", client_id="t",
                       session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                       security=security)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_member_joins_over_sasl_ssl(broker: SecuredBroker, mechanism: str) -> None:
    worker = member(broker, mechanism)
    joined = worker.join([("default", b"meta")], lambda _p, ms: {m: b"mine" for m in ms})
    assert joined.assignment == b"mine" and joined.leader_id == joined.member_id
    assert worker.heartbeat() == 0
    worker.leave()


def test_a_wrong_password_is_a_group_error(broker: SecuredBroker) -> None:
    with pytest.raises(GroupError, match="SASL authentication failed"):
        member(broker, "SCRAM-SHA-512", "wrong").join([("default", b"")], lambda _p, ms: {})


# --- The REST API with Kafka's BasicAuthSecurityRestExtension: the cluster's SCRAM users ----

USER, PASSWORD = CREDENTIALS["SCRAM-SHA-512"]


def _basic(text: bytes) -> str:
    return "Basic " + base64.b64encode(text).decode()


def secured_worker(broker: SecuredBroker, data_dir: Path,
                   keystore: dict[str, str]) -> WorkerProcess:
    """A worker whose clients log in over SASL_SSL as a SCRAM user and whose REST API
    serves HTTPS (its keystore in Kafka's `listeners.https.` keys, so the unprefixed
    `ssl.*` stay its Kafka clients') and asks HTTP Basic of the cluster's SCRAM users."""
    return WorkerProcess(data_dir, broker.bootstrap("SASL_SSL"), "connect-basic-auth", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                            f'required username="{USER}" password="{PASSWORD}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": broker.ca_file,
        "rest.extension.classes": BASIC_AUTH_EXTENSION,
        "rest.basic.auth.realm": "connect-test",
        **keystore,
    }, auth=(USER, PASSWORD), scheme="https", ca=broker.ca_file)


def pem_keystore(broker: SecuredBroker) -> dict[str, str]:
    pair = broker.ca.issue("connect-rest", "localhost", "Millrace")
    return {"listeners.https.ssl.keystore.type": "PEM",
            "listeners.https.ssl.keystore.location": str(broker.ca.keystore_pem(pair))}


def pkcs12_keystore(broker: SecuredBroker) -> dict[str, str]:
    pair = broker.ca.issue("connect-rest-p12", "localhost", "Millrace")
    return {"listeners.https.ssl.keystore.type": "PKCS12",
            "listeners.https.ssl.keystore.location": str(broker.ca.pkcs12(pair, "p12-pw")),
            "listeners.https.ssl.keystore.password": "p12-pw"}


@pytest.fixture(scope="module")
def leader(broker: SecuredBroker, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    worker = secured_worker(broker, tmp_path_factory.mktemp("basic-auth-workers"),
                            pem_keystore(broker)).start(90)
    yield worker
    worker.stop()


MALFORMED = ["Bearer abc", "Basic", "Basic !!not-base64!!", _basic(b"no colon"),
             _basic(b"\xff\xfe:not utf-8"), _basic(b":no user")]
REFUSED_LOGINS = [_basic(f"{USER}:wrong".encode()), _basic(b"nobody:whatever"),
                  # a SCRAM-SHA-256 user: the worker logs in with SCRAM-SHA-512
                  _basic(":".join(CREDENTIALS["SCRAM-SHA-256"]).encode())]


def assert_refused(answer: httpx.Response) -> None:
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"] == 'Basic realm="connect-test"'
    body = answer.json()
    assert body["error_code"] == 401
    assert body["message"].startswith("User cannot access the resource.")


def test_the_rest_api_refuses_without_the_right_credentials(leader: WorkerProcess) -> None:
    with httpx.Client(base_url=leader.url, timeout=60, verify=leader.verify) as client:
        # every route, a missing one included: authentication comes before routing
        for method, path in (("GET", "/"), ("GET", "/connectors"), ("GET", "/no/such/route"),
                             ("POST", "/connectors"), ("DELETE", "/connectors/any")):
            assert_refused(client.request(method, path))
        for header in MALFORMED + REFUSED_LOGINS:  # never a 500
            assert_refused(client.get("/connectors", headers={"authorization": header}))


def test_a_scram_user_is_served(leader: WorkerProcess) -> None:
    answer = leader.get("/")
    assert answer.status_code == 200 and "kafka_cluster_id" in answer.json()
    assert leader.get("/connectors").status_code == 200
    assert leader.get("/nowhere").status_code == 404  # routed once authenticated


def test_the_rest_api_answers_only_https_trusted_with_its_ca(
        broker: SecuredBroker, leader: WorkerProcess) -> None:
    assert leader.url.startswith("https://")
    # Plain HTTP on the port gets no HTTP answer: the TLS handshake fails and it closes.
    with socket.create_connection(("127.0.0.1", leader.port), timeout=30) as plain:
        plain.sendall(b"GET /connectors HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert not _read_all(plain).startswith(b"HTTP/")
    with pytest.raises(httpx.HTTPError):
        httpx.get(leader.url.replace("https://", "http://") + "/", timeout=30,
                  auth=(USER, PASSWORD))
    # The system's CAs do not know the test CA; the worker's own peer context does, and
    # refuses a server another CA vouches for (a self-signed certificate as truststore).
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(leader.url + "/", timeout=30, auth=(USER, PASSWORD))
    trusting = client_context(leader.props)
    assert trusting.verify_mode == ssl.CERT_REQUIRED and trusting.check_hostname
    assert httpx.get(leader.url + "/", timeout=30, auth=(USER, PASSWORD),
                     verify=trusting).status_code == 200
    stranger = client_context({**leader.props,
                               "ssl.truststore.location": str(broker.stranger.cert)})
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(leader.url + "/", timeout=30, verify=stranger)


def _read_all(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


def test_the_rest_apis_tls_keys_are_kafkas_all_or_nothing_prefix() -> None:
    worker = {"ssl.truststore.location": "/ca.crt", "ssl.keystore.location": "/kafka.p12"}
    assert https_settings(worker) == worker  # no listeners.https.*: the worker's ssl.*
    prefixed = {**worker, "listeners.https.ssl.keystore.location": "/rest.pem"}
    assert https_settings(prefixed) == {"ssl.keystore.location": "/rest.pem"}
    config = WorkerConfig.from_props({**BASE, "listeners": "https://localhost:8443"})
    assert (config.rest_scheme, config.advertised_url, config.worker_id) == (
        "https", "https://localhost:8443", "localhost:8443")
    assert config.worker_url("other:8443") == "https://other:8443"
    for bad in ({"listeners": "ftp://localhost:8083"},
                {"rest.advertised.listener": "gopher"}):
        with pytest.raises(ConfigException):
            WorkerConfig.from_props({**BASE, **bad})


def test_a_follower_forwards_with_the_callers_credentials(
        broker: SecuredBroker, leader: WorkerProcess, tmp_path: Path) -> None:
    follower = secured_worker(broker, tmp_path, pkcs12_keystore(broker)).start(90)
    try:
        source = tmp_path / "lines.txt"
        source.write_text("one\ntwo\n")
        config = {"connector.class": "FileStreamSource", "file": str(source),
                  "topic": "basic-auth-lines"}

        def put() -> httpx.Response | None:
            answer = follower.request("PUT", "/connectors/forwarded/config", config)
            return None if answer.status_code == 409 else answer  # a rebalance: again

        answer = wait_for(put, 90, "the follower never forwarded")
        assert answer.status_code == 201, answer.text
        # The follower's answer is the leader's: it wrote the config, and both see it.
        def listed_by_both() -> bool:
            return all("forwarded" in w.get("/connectors").json() for w in (leader, follower))

        wait_for(listed_by_both, 60, "the connector never showed on both workers")
        # The connector's tasks run wherever the group put them; a follower running it
        # sends their configs to the leader as itself: they arrive either way.
        wait_for(lambda: leader.get("/connectors/forwarded/tasks").json(), 60,
                 "the task configs never reached the leader")
        refused = httpx.get(follower.url + "/connectors", auth=(USER, "wrong"), timeout=60,
                            verify=follower.verify)
        assert_refused(refused)
        assert_forwarded_refusal_says_how_to_authenticate(broker, follower, config)
    finally:
        follower.stop()


def assert_forwarded_refusal_says_how_to_authenticate(
        broker: SecuredBroker, follower: WorkerProcess, config: dict[str, str]) -> None:
    """A password changed while the follower still has the old one cached: the follower
    lets the caller through, the leader refuses, and the 401 that comes back still carries
    `WWW-Authenticate`, as every 401 must."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})

    def set_password(password: str) -> None:
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        upsert = UserScramCredentialUpsertion("carol", info, password.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)

    set_password("first")
    carol = ("carol", "first")
    wait_for(lambda: httpx.get(follower.url + "/connectors", auth=carol, timeout=60,
                               verify=follower.verify).status_code == 200, 30,
             "carol never logged in to the follower")  # now in its login cache
    set_password("second")
    answer = httpx.put(follower.url + "/connectors/carols/config", json=config, auth=carol,
                       timeout=60, verify=follower.verify)
    assert_refused(answer)  # the leader's words and challenge, passed on


def test_the_extension_is_configured_the_kafka_way() -> None:
    secured = {**BASE, "security.protocol": "SASL_SSL"}
    assert BasicAuthConfig.from_worker(WorkerConfig.from_props(secured)) is None
    on = BasicAuthConfig.from_worker(WorkerConfig.from_props(
        {**secured, "rest.extension.classes": BASIC_AUTH_EXTENSION}))
    assert on is not None and on.login["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert on.realm == "KafkaConnect" and on.cache_s == 60
    with pytest.raises(ConfigException, match=r"rest\.extension\.classes"):
        BasicAuthConfig.from_worker(WorkerConfig.from_props(
            {**secured, "rest.extension.classes": "com.example.OtherExtension"}))
    with pytest.raises(ConfigException, match="SASL_PLAINTEXT or SASL_SSL"):
        BasicAuthConfig.from_worker(WorkerConfig.from_props(
            {**BASE, "rest.extension.classes": BASIC_AUTH_EXTENSION}))
