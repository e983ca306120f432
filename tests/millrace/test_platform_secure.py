"""`manage.py platform` with MILLRACE_SECURE=1 from a fresh data dir: the brokers answer only
SASL_SSL, the client config the endpoint table prints works with confluent-kafka and kcat,
the platform's own services reach the secured cluster (collector, REST proxy, supervisor
status), and the control center asks for a login. It runs with `--clusters 2`: the second
built-in cluster is secured as the first is, with its own client config."""

from __future__ import annotations

import json
import re
import signal
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka
import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from millrace.secure import SecureFiles
from millrace.settings import read_properties
from tests.brokerproc import REPO
from tests.millrace.test_platform import Running, platform_env, wait_for_output, wait_until

pytestmark = pytest.mark.slow
AVRO_SCHEMA = json.dumps({"type": "record", "name": "Person",
                          "fields": [{"name": "name", "type": "string"}]})


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    env = platform_env()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "platform", "--any-port", "--workers", "1",
         "--clusters", "2", "--data-dir", str(tmp_path_factory.mktemp("secure-platform"))],
        cwd=REPO, env={**env, "MILLRACE_SECURE": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        # a loaded machine takes minutes to start every part over TLS and SASL
        yield Running(proc, "".join(wait_for_output(proc, timeout=420)))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)


def trusting(config: dict[str, str]) -> ssl.SSLContext:
    """An SSL context trusting the platform's CA (the client config's ssl.ca.location)."""
    return ssl.create_default_context(cafile=config["ssl.ca.location"])


def client_config(running: Running) -> dict[str, str]:
    path = re.search(r"Client config\s+(\S+)", running.text)
    assert path is not None, running.text
    return read_properties(Path(path.group(1)))


def test_the_printed_client_config_is_the_admins_login(running: Running) -> None:
    config = client_config(running)
    password = re.search(r"Kafka admin\s+user admin, password (\S+)  \(shown only this once\)",
                         running.text)
    assert password is not None, running.text
    assert config == {
        "bootstrap.servers": running.endpoint("Kafka bootstrap"),
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "admin", "sasl.password": password.group(1),
        "ssl.ca.location": config["ssl.ca.location"]}
    assert "SASL_SSL" in running.text.split("Kafka bootstrap")[1].splitlines()[0]


def refused(config: dict[str, str]) -> list[confluent_kafka.KafkaError]:
    """The errors a client with `config` reports, once it has reported one, and after that
    its metadata request still gets no answer. The error comes within milliseconds of the
    refused connection or login, so the request's timeout need not be long."""
    errors: list[confluent_kafka.KafkaError] = []
    client = AdminClient({**config, "error_cb": errors.append})

    def reported() -> list[confluent_kafka.KafkaError] | None:
        client.poll(0.1)  # serves error_cb
        return errors or None

    wait_until("the client to report its refusal", reported)
    with pytest.raises(confluent_kafka.KafkaException):
        client.list_topics(timeout=1)
    return errors


def test_a_plaintext_client_gets_nothing(running: Running) -> None:
    assert refused({"bootstrap.servers": running.endpoint("Kafka bootstrap")})


def test_confluent_kafka_and_kcat_work_with_the_client_config(running: Running) -> None:
    config = client_config(running)
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    producer = confluent_kafka.Producer({**config, "acks": "all"})
    producer.produce(topic, b"from confluent-kafka")
    assert producer.flush(30) == 0

    properties = re.search(r"Client config\s+(\S+)", running.text).group(1)  # type: ignore[union-attr]
    kcat = subprocess.run(["kcat", "-F", properties, "-C", "-t", topic, "-o", "beginning",
                           "-c", "1", "-e", "-J"], capture_output=True, timeout=60)
    assert kcat.returncode == 0, kcat.stderr
    assert json.loads(kcat.stdout.splitlines()[0])["payload"] == "from confluent-kafka"

    # The platform's own clients log in too: the REST proxy reads the topic list, and the
    # collector's snapshot brings the topic to the overview, seen once signed in.
    # The registry and the proxy answer nothing without credentials (HTTP Basic, the
    # cluster's SCRAM users); with the admin's, the proxy talks to Kafka as the admin.
    rest, registry = running.endpoint("REST proxy"), running.endpoint("Schema registry")
    ca = trusting(config)
    for url in (rest + "/topics", registry + "/subjects"):
        refused = httpx.get(url, timeout=30, verify=ca)
        assert refused.status_code == 401 and refused.json()["error_code"] == 40101, url
        assert refused.headers["www-authenticate"].startswith("Basic")
    admin_login = ("admin", config["sasl.password"])
    assert httpx.get(registry + "/subjects", auth=admin_login, timeout=30, verify=ca
                     ).json() == []

    def listed() -> list[str] | None:
        topics: list[str] = httpx.get(rest + "/topics", auth=admin_login, timeout=30,
                                      verify=ca).json()
        return topics if topic in topics else None

    wait_until("the REST proxy to list the topic", listed)
    with signed_in(running) as browser:
        wait_until("the collector's snapshot to show the topic",
                   lambda: topic in browser.get("/").text)


@contextmanager
def signed_in(running: Running) -> Iterator[httpx.Client]:
    """A client of the control center, signed in as its admin."""
    password = re.search(r"Admin login\s+user admin, password (\S+)", running.text)
    assert password is not None, running.text
    with httpx.Client(base_url=running.endpoint("Control center"), timeout=30) as browser:
        form = browser.get("/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token is not None
        answer = browser.post("/login/", data={
            "username": "admin", "password": password.group(1),
            "csrfmiddlewaretoken": token.group(1), "next": "/"})
        assert answer.status_code == 302, answer.text
        yield browser


def test_the_registry_and_proxy_speak_https_to_confluents_unmodified_client(
        running: Running) -> None:
    config = client_config(running)
    registry, rest = running.endpoint("Schema registry"), running.endpoint("REST proxy")
    assert registry.startswith("https://") and rest.startswith("https://"), running.text
    assert f"SCHEMA_REGISTRY_URL={registry}" in running.text
    client = SchemaRegistryClient({
        "url": registry, "ssl.ca.location": config["ssl.ca.location"],
        "basic.auth.user.info": f"admin:{config['sasl.password']}"})
    subject = f"https-{uuid.uuid4().hex[:8]}-value"
    schema_id = client.register_schema(subject, Schema(AVRO_SCHEMA, "AVRO"))
    assert client.get_latest_version(subject).schema_id == schema_id
    # Without the CA the certificate is not trusted; plain HTTP on the port is refused.
    with pytest.raises(httpx.ConnectError):
        httpx.get(registry + "/subjects", timeout=10)
    with pytest.raises(httpx.HTTPError):
        httpx.get(registry.replace("https://", "http://") + "/subjects", timeout=10)
    # The proxy's own registry client trusts the platform's CA: an Avro produce registers
    # its schema over HTTPS, as the caller.
    topic = f"https-avro-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    # CreateTopics answers once the controller has committed the topic; the broker the proxy
    # asks may apply that record a moment later (as in Kafka), and until then it is 40401.
    login = ("admin", config["sasl.password"])
    wait_until("the proxy to see the new topic", lambda: httpx.get(
        f"{rest}/topics/{topic}", verify=trusting(config), timeout=30,
        auth=login).status_code == 200)
    produced = httpx.post(
        f"{rest}/topics/{topic}", verify=trusting(config), timeout=60, auth=login,
        headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
        json={"value_schema": AVRO_SCHEMA, "records": [{"value": {"name": "ada"}}]})
    assert produced.status_code == 200, produced.text
    assert produced.json()["value_schema_id"] == schema_id


def test_the_connect_worker_joins_and_produces_over_sasl_ssl(running: Running,
                                                            tmp_path: Path) -> None:
    config = client_config(running)
    connect = running.endpoint("Kafka Connect")
    assert "SASL_SSL to the cluster" in running.text
    # HTTPS only, as the registry and the proxy: the platform's CA, no plain HTTP answer
    assert connect.startswith("https://"), running.text
    with pytest.raises(httpx.HTTPError):
        httpx.get(connect.replace("https://", "http://") + "/", timeout=10)
    ca = trusting(config)
    topic = f"connect-secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    source = tmp_path / "lines.txt"
    source.write_text("one\ntwo\nthree\n")
    # Its REST API asks HTTP Basic of the cluster's SCRAM users (Kafka's
    # BasicAuthSecurityRestExtension), as the registry and the proxy do.
    connector = {"name": f"file-{topic}", "config": {
        "connector.class": "FileStreamSource", "file": str(source), "topic": topic}}
    for login in (None, ("admin", "wrong")):
        refused = httpx.post(f"{connect}/connectors", timeout=60, json=connector, auth=login,
                             verify=ca)
        assert refused.status_code == 401 and refused.json()["error_code"] == 401, refused.text
        assert refused.headers["www-authenticate"].startswith("Basic realm=")
    assert httpx.get(connect, timeout=60, verify=ca).status_code == 401
    created = httpx.post(f"{connect}/connectors", timeout=60, json=connector,
                         auth=("admin", config["sasl.password"]), verify=ca)
    assert created.status_code == 201, created.text
    consumer = confluent_kafka.Consumer({**config, "group.id": f"check-{topic}",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []

    def three() -> list[bytes] | None:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            values.append(message.value())
        return values if len(values) == 3 else None

    try:
        wait_until("the secured Connect worker's records", three)
    finally:
        consumer.close()
    # The control center's Connect and Replication pages ask the worker with the
    # platform's service credentials.
    with signed_in(running) as browser:
        assert f"file-{topic}" in browser.get("/connect/").text
        replication = browser.get("/replication/").text
        assert "did not answer" not in replication, replication
    decoded = [json.loads(v) for v in values]  # JsonConverter: with its schema envelope
    assert [d["payload"] if isinstance(d, dict) else d for d in decoded] == [
        "one", "two", "three"]


SECOND = "millrace-2"


def test_the_second_cluster_is_secured_as_the_first(running: Running) -> None:
    """`--secure --clusters 2`: the second cluster refuses a plaintext client and a wrong
    password, takes the admin's SCRAM login from its own printed client config, and every
    service reaches it with its login: the REST proxy (as the caller), its collector (the
    control center's pages) and its Connect worker (HTTP Basic)."""
    second = running.endpoint(rf"Kafka bootstrap \({SECOND}\)")
    assert "SASL_SSL" in running.text.split(f"Kafka bootstrap ({SECOND})")[1].splitlines()[0]
    first = client_config(running)
    path = running.endpoint(rf"Client config \({SECOND}\)")
    config = read_properties(Path(path))
    assert path != re.search(r"Client config\s+(\S+)", running.text).group(1)  # type: ignore[union-attr]
    assert config == {**first, "bootstrap.servers": second}  # one CA, one admin password

    errors = refused({"bootstrap.servers": second}) + refused(
        {**config, "sasl.password": "wrong"})
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in errors), errors

    topic = f"secure-second-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert topic not in AdminClient(first).list_topics(timeout=30).topics
    second_id = admin.list_topics(timeout=30).cluster_id

    # The REST proxy reaches the second cluster as the caller, with its login there.
    rest, ca = running.endpoint("REST proxy"), trusting(config)
    login = ("admin", config["sasl.password"])
    listed = httpx.get(f"{rest}/v3/clusters", auth=login, verify=ca, timeout=30).json()
    assert second_id in [c["cluster_id"] for c in listed["data"]], listed
    wait_until("the proxy to see the second cluster's topic", lambda: httpx.get(
        f"{rest}/v3/clusters/{second_id}/topics/{topic}", auth=login, verify=ca,
        timeout=30).status_code == 200)
    produced = httpx.post(f"{rest}/v3/clusters/{second_id}/topics/{topic}/records",
                          json={"value": {"type": "JSON", "data": {"on": 2}}}, auth=login,
                          verify=ca, timeout=30)
    assert produced.status_code == 200 and produced.json()["offset"] == 0, produced.text

    # Its Connect worker serves HTTPS, asks HTTP Basic of that cluster's SCRAM users, and
    # runs on it.
    connect = running.endpoint(rf"Kafka Connect \({SECOND}\)")
    assert connect.startswith("https://"), running.text
    assert httpx.get(connect + "/", timeout=30, verify=ca).status_code == 401
    assert httpx.get(connect + "/", auth=login, timeout=30, verify=ca).json()[
        "kafka_cluster_id"] == second_id
    # Its collector samples it with the services' login; the Connect page asks its worker.
    with signed_in(running) as browser:
        wait_until("the second cluster's collector to sample the topic", lambda: topic in
                   browser.get("/topics/", params={"cluster": SECOND}).text)
        assert f"<code>{connect}</code>" in browser.get("/connect/").text
        assert "did not answer" not in browser.get("/connect/").text


def test_the_supervisor_status_sees_the_secured_brokers(running: Running) -> None:
    data_dir = re.search(r"Data directory\s+(\S+)", running.text).group(1)  # type: ignore[union-attr]
    done = subprocess.run([sys.executable, "-m", "brokercluster", "status", "--json",
                           "--data-dir", f"{data_dir}/cluster"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    status = json.loads(done.stdout)
    assert [(b["state"], b["sees"]) for b in status["brokers"]] == [
        ("running", [1, 2, 3])] * 3, status


def test_the_control_center_redirects_to_its_login(running: Running) -> None:
    web = running.endpoint("Control center")
    answer = httpx.get(web, follow_redirects=False, timeout=10)
    assert answer.status_code == 302
    assert answer.headers["location"].startswith("/login/")
    # The JSON API and the lag metrics ask for a token or a SCRAM user's Basic login.
    admin = ("admin", client_config(running)["sasl.password"])
    for url in (f"{web.rstrip('/')}/api/v1/groups", running.endpoint("Lag metrics")):
        refused = httpx.get(url, timeout=30)
        assert refused.status_code == 401, (url, refused.text)
        assert refused.headers["www-authenticate"].startswith("Basic")
        assert httpx.get(url, auth=admin, timeout=30).status_code == 200, url


def test_ctrl_c_stops_the_secured_platform(running: Running) -> None:
    output = running.stop()
    assert running.proc.returncode == 0, output
    assert "cluster is [DOWN]" in output and f"cluster {SECOND} is [DOWN]" in output


def test_the_ca_certificates_and_passwords_are_kept_across_starts(tmp_path: Path) -> None:
    first = SecureFiles.ensure(tmp_path)
    made = {p.name: p.read_bytes() for p in first.directory.iterdir()}
    again = SecureFiles.ensure(tmp_path)
    assert first.admin_password_new is not None and again.admin_password_new is None
    assert again.passwords == first.passwords
    assert {p.name: p.read_bytes() for p in again.directory.iterdir()} == made
    assert {name: oct((first.directory / name).stat().st_mode & 0o777) for name in made} == {
        "ca.crt": "0o644", "ca.key": "0o600", "broker.pem": "0o600", "http.pem": "0o600",
        "credentials.json": "0o600"}
