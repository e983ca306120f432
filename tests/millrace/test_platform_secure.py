"""`manage.py platform` with MILLRACE_SECURE=1 from a fresh data dir: the brokers answer only
SASL_SSL, the client config the endpoint table prints works with confluent-kafka and kcat,
the platform's own services reach the secured cluster (collector, REST proxy, supervisor
status), and the control center asks for a login."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from millrace.secure import SecureFiles
from millrace.settings import read_properties
from tests.brokerproc import REPO
from tests.millrace.test_platform import Running, wait_for_output, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "platform", "--any-port", "--workers", "1",
         "--data-dir", str(tmp_path_factory.mktemp("secure-platform"))],
        cwd=REPO, env={**env, "MILLRACE_SECURE": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        yield Running(proc, "".join(wait_for_output(proc)))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)


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


def test_a_plaintext_client_gets_nothing(running: Running) -> None:
    errors: list[confluent_kafka.KafkaError] = []
    plain = AdminClient({"bootstrap.servers": running.endpoint("Kafka bootstrap"),
                         "error_cb": errors.append})
    with pytest.raises(confluent_kafka.KafkaException):
        plain.list_topics(timeout=5)
    plain.poll(0)
    assert errors, "no error for a plaintext client"


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
    for url in (rest + "/topics", registry + "/subjects"):
        refused = httpx.get(url, timeout=30)
        assert refused.status_code == 401 and refused.json()["error_code"] == 40101, url
        assert refused.headers["www-authenticate"].startswith("Basic")
    admin_login = ("admin", config["sasl.password"])
    assert httpx.get(registry + "/subjects", auth=admin_login, timeout=30).json() == []

    def listed() -> list[str] | None:
        topics: list[str] = httpx.get(rest + "/topics", auth=admin_login, timeout=30).json()
        return topics if topic in topics else None

    wait_until("the REST proxy to list the topic", listed)
    password = re.search(r"Admin login\s+user admin, password (\S+)", running.text)
    assert password is not None, running.text
    with httpx.Client(base_url=running.endpoint("Control center"), timeout=10) as browser:
        form = browser.get("/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token is not None
        signed_in = browser.post("/login/", data={
            "username": "admin", "password": password.group(1),
            "csrfmiddlewaretoken": token.group(1), "next": "/"})
        assert signed_in.status_code == 302, signed_in.text
        wait_until("the collector's snapshot to show the topic",
                   lambda: topic in browser.get("/").text)


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


def test_ctrl_c_stops_the_secured_platform(running: Running) -> None:
    output = running.stop()
    assert running.proc.returncode == 0, output
    assert "cluster is [DOWN]" in output


def test_the_ca_certificates_and_passwords_are_kept_across_starts(tmp_path: Path) -> None:
    first = SecureFiles.ensure(tmp_path)
    made = {p.name: p.read_bytes() for p in first.directory.iterdir()}
    again = SecureFiles.ensure(tmp_path)
    assert first.admin_password_new is not None and again.admin_password_new is None
    assert again.passwords == first.passwords
    assert {p.name: p.read_bytes() for p in again.directory.iterdir()} == made
    assert {name: oct((first.directory / name).stat().st_mode & 0o777) for name in made} == {
        "ca.crt": "0o644", "ca.key": "0o600", "broker.pem": "0o600",
        "credentials.json": "0o600"}
