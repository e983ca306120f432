"""The README's first command: the platform starts its three-broker cluster and every
endpoint, offers the failover commands that work, and stops everything cleanly.

One platform serves the module's tests in file order (starting one takes a migration, three
brokers, the web server, Celery and the collector): each test leaves the cluster with all three
brokers running, and the last one stops the platform with Ctrl-C. It runs with `--clusters 2`
(one more broker and collector than `make run`), so the second built-in cluster is tested
here too rather than by a platform of its own; the first cluster's tests see what `make run`
gives, the second's rows come after all of them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import confluent_kafka
import confluent_kafka.admin
import httpx
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from prometheus_client.parser import text_string_to_metric_families

from tests.brokerproc import REPO
from tests.compat.clients import new_topic

pytestmark = pytest.mark.slow


def wait_for_endpoints(proc: subprocess.Popen[str], timeout: float = 180) -> dict[str, str]:
    return endpoints_in("".join(wait_for_output(proc, timeout)))


def endpoints_in(text: str) -> dict[str, str]:
    """The endpoint table the platform printed, and the admin password if it printed one."""
    endpoints = {
        name: re.search(rf"{name}\s+(\S+)", text).group(1)  # type: ignore[union-attr]
        for name in ("Kafka bootstrap", "Control center", "Schema registry", "REST proxy",
                     "Kafka Connect")
    }
    admin = re.search(r"Admin login\s+user admin, password (\S+)  \(shown only this once\)", text)
    if admin:
        endpoints["admin password"] = admin.group(1)
    return endpoints


def wait_for_output(proc: subprocess.Popen[str], timeout: float = 180) -> list[str]:
    """The platform's output up to its "Press Ctrl-C" line."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "Press Ctrl-C to stop." in line:
            return lines
    raise AssertionError("platform did not print its endpoints:\n" + "".join(lines))


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def port_of(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


def is_listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def platform_env() -> dict[str, str]:
    """The environment of a platform a test starts: the built-in cluster (no
    KAFKA_BOOTSTRAP_SERVERS), and the test settings that hash passwords cheaply
    (tests/platform_settings.py), which each of its Django processes inherits."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    return {**env, "DJANGO_SETTINGS_MODULE": "tests.platform_settings"}


def platform(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = platform_env()
    return subprocess.Popen(
        [sys.executable, "manage.py", "platform", "--any-port", "--data-dir", str(data_dir),
         *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


T = TypeVar("T")
BROKER_ROW = re.compile(r"Broker (\d)\s+Kafka 127\.0\.0\.1:(\d+), controller :(\d+), "
                        r"metrics (http://127\.0\.0\.1:(\d+)/metrics)")


@dataclass
class Running:
    """A platform past its "Press Ctrl-C" line: what it printed up to there (`text`) and,
    read by a thread so that a full pipe never blocks it, everything after (`later`)."""

    proc: subprocess.Popen[str]
    text: str
    later: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.later.append(line)

    def endpoint(self, name: str) -> str:
        return re.search(rf"{name}\s+(\S+)", self.text).group(1)  # type: ignore[union-attr]

    def wait_for_later(self, what: str, timeout: float = 60) -> None:
        wait_until(f"the platform to print {what!r}", lambda: what in "".join(self.later),
                   timeout)

    def stop(self) -> str:
        """Ctrl-C, and everything printed after the endpoints."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            # 14 children stopped in turn, the clusters' brokers each given up to 15 s: on a
            # loaded machine (load 30 on 2 cores) the whole stop outlasted 60 s
            self.proc.wait(240)
        self.reader.join(10)
        return "".join(self.later)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    proc = platform(tmp_path_factory.mktemp("platform"), "--clusters", "2")
    try:
        # 13 children with --clusters 2, each waited for in turn: on a loaded machine
        # (load 26 on 2 cores) the start outlasted 180 s
        yield Running(proc, "".join(wait_for_output(proc, 420)))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)


def wait_until(what: str, probe: Callable[[], T | None], timeout: float = 60) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def assert_an_analysis_runs(web: str, password: str, topic: str) -> None:
    """The platform's own Celery worker runs a Spark job launched through the API."""
    auth = ("admin", password)
    launched = httpx.post(f"{web}api/v1/analysis", auth=auth, timeout=30,
                          json={"job": "hot_partitions", "topics": [topic]})
    assert launched.status_code == 202, launched.text
    run = f"{web}api/v1/analysis/{launched.json()['id']}"
    deadline = time.monotonic() + 300
    # 30 s as the launch: with Spark running, a signed-in request (a password hash) on a
    # loaded machine outlasted httpx's default 5 s
    while (status := httpx.get(run, auth=auth, timeout=30).json()["status"]) in (
            "QUEUED", "RUNNING"):
        assert time.monotonic() < deadline, f"the analysis is still {status}"
        time.sleep(1)
    assert status == "SUCCEEDED", httpx.get(run, auth=auth, timeout=30).json()["error"]
    rows = httpx.get(f"{run}/results", auth=auth, timeout=30).json()["tables"]["partitions"]["rows"]
    assert sum(r["messages"] for r in rows) == 1


# The module's platform start counts towards its first test's timeout: at load 20 on 2 cores
# that start (2 min) and the Spark job (4 min) outlasted the default 300 s, the job succeeding.
@pytest.mark.timeout(600)
def test_platform_serves_every_endpoint(running: Running) -> None:
    endpoints = endpoints_in(running.text)
    topic = new_topic("platform")
    producer = confluent_kafka.Producer({"bootstrap.servers": endpoints["Kafka bootstrap"]})
    producer.produce(topic, b"hello")
    assert producer.flush(20) == 0
    assert_an_analysis_runs(endpoints["Control center"], endpoints["admin password"], topic)

    # The overview shows the collector's snapshot: the topic within an interval or two.
    deadline = time.monotonic() + 30
    while topic not in (overview := get(endpoints["Control center"])):
        assert time.monotonic() < deadline, overview
        time.sleep(1)
    assert_admin_signs_in(endpoints["Control center"], endpoints["admin password"])
    assert get(endpoints["Schema registry"] + "/subjects") == "[]"
    assert topic in get(endpoints["REST proxy"] + "/topics")
    # The Connect worker answers Kafka's REST API, on the cluster the platform runs.
    connect = httpx.get(endpoints["Kafka Connect"] + "/").json()
    assert connect["version"] and connect["kafka_cluster_id"]
    plugins = httpx.get(endpoints["Kafka Connect"] + "/connector-plugins").json()
    classes = {p["class"] for p in plugins}
    assert "org.apache.kafka.connect.file.FileStreamSourceConnector" in classes


def replicas(admin: AdminClient, topic: str) -> list[int] | None:
    found = admin.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        return None
    return sorted({len(p.replicas) for p in found.partitions.values()})


def preferred_led(admin: AdminClient, topic: str) -> bool:
    parts = admin.list_topics(topic, timeout=10).topics[topic].partitions.values()
    return all(p.leader == p.replicas[0] for p in parts)


def test_the_cluster_replicates_lists_its_ports_and_rebalances(running: Running) -> None:
    """Replicated topics (auto-created ones and __consumer_offsets included), every open port
    in the endpoint table, and preferred leadership back soon after a broker returns."""
    text = running.text
    bootstrap = running.endpoint("Kafka bootstrap")
    rows = BROKER_ROW.findall(text)
    assert [row[0] for row in rows] == ["1", "2", "3"], text
    for _node, kafka, controller, _url, metrics in rows:
        assert all(is_listening(int(p)) for p in (kafka, controller, metrics)), text

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = new_topic("auto-created")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, b"hello")
    assert producer.flush(30) == 0
    assert wait_until(f"{topic} to exist", lambda: replicas(admin, topic)) == [3]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["min.insync.replicas"].value == "2"

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": new_topic("group"),
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    message = wait_until("a record", lambda: consumer.poll(1.0))
    consumer.commit(message=message, asynchronous=False)
    consumer.close()
    assert replicas(admin, "__consumer_offsets") == [3]

    # The failover commands the platform prints, whatever module runs the cluster.
    printed = [re.search(r"-m \w+ (?:cluster )?(\w+(?: \d)?)\s+--data-dir", line)
               for line in text.splitlines()]
    commands = {found[1]: line.split("#")[0].strip()
                for found, line in zip(printed, text.splitlines(), strict=True) if found}
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    run_printed(commands["kill 2"].replace(" 2 ", f" {leader} "))
    wait_until("leadership to move", lambda: not preferred_led(admin, topic))
    run_printed(commands["start 2"].replace(" 2 ", f" {leader} "))
    wait_until("the preferred leader to come back", lambda: preferred_led(admin, topic))


def test_the_failover_commands_work_and_a_crashed_collector_is_restarted(
    running: Running,
) -> None:
    text = running.text
    servers = running.endpoint("Kafka bootstrap").split(",")
    assert len(servers) == 3
    commands = [line.split("#")[0].strip() for line in text.splitlines()
                if " -m brokercluster " in line]
    by_action = {c.split(" -m brokercluster ")[1].split(" --data-dir")[0]: c for c in commands}
    assert set(by_action) == {"status", "kill 2", "start 2", "restart 1"}

    web = running.endpoint("Control center")
    deadline = time.monotonic() + 60  # the overview shows the collector's first sample
    while True:
        overview = get(web)
        broker_rows = re.findall(r'<tr id="broker-row-(\d+)" data-broker="\d+" '
                                 r'data-status="up"', overview)
        if broker_rows == ["1", "2", "3"] or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert broker_rows == ["1", "2", "3"], overview

    killed = run_printed(by_action["kill 2"])
    assert "broker 2 killed" in killed, killed
    status = run_printed(by_action["status"])
    states = re.findall(r"^\s+(\d)\s+(\w+)", status, re.M)
    assert states == [("1", "running"), ("2", "killed"), ("3", "running")], status
    assert "broker 2 started" in run_printed(by_action["start 2"])
    assert all(is_listening(port_of(s)) for s in servers)

    # A crashed collector (librdkafka can segfault while a group coordinator moves) is
    # restarted, and the overview goes on following the cluster.
    os.kill(child_pid(running.proc.pid, "collect", unless="--cluster"), signal.SIGSEGV)
    running.wait_for_later("collector exited (code -11); restarting it")
    topic = new_topic("after-crash")
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": running.endpoint(
        "Kafka bootstrap")})
    admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 3)])[topic].result(30)
    deadline = time.monotonic() + 60
    while topic not in (overview := get(web)):
        assert time.monotonic() < deadline, overview
        time.sleep(1)


SECOND = "millrace-2"


def test_a_second_cluster_has_its_own_broker_collector_proxy_routes_and_pages(
        running: Running) -> None:
    """`--clusters 2`: a one-broker cluster with its own ports and data dir in the table,
    every service told of it: v3 of the REST proxy lists and produces to it, the control
    center switches to it and shows its topics as its own collector sampled them, its own
    Connect worker runs on it and is the Connect page's, and the one lag metrics endpoint
    carries it under its cluster_name."""
    text = running.text
    second = running.endpoint(rf"Kafka bootstrap \({SECOND}\)")
    assert re.search(rf"{SECOND} broker 1\s+Kafka {second}, controller :\d+", text), text
    assert f"cluster-{SECOND}" in text
    first_id = AdminClient({"bootstrap.servers": running.endpoint("Kafka bootstrap")}
                           ).list_topics(timeout=10).cluster_id
    second_id = AdminClient({"bootstrap.servers": second}).list_topics(timeout=10).cluster_id
    assert first_id != second_id
    proxy = running.endpoint("REST proxy")
    listed = httpx.get(f"{proxy}/v3/clusters", timeout=30).json()["data"]
    assert [c["cluster_id"] for c in listed] == [first_id, second_id]
    topic = new_topic("second")
    created = httpx.post(f"{proxy}/v3/clusters/{second_id}/topics", timeout=30,
                         json={"topic_name": topic, "partitions_count": 1})
    assert created.status_code == 201, created.text
    produced = httpx.post(f"{proxy}/v3/clusters/{second_id}/topics/{topic}/records",
                          json={"value": {"type": "JSON", "data": {"on": 2}}}, timeout=30)
    assert produced.status_code == 200 and produced.json()["offset"] == 0, produced.text
    first_topics = AdminClient({"bootstrap.servers": running.endpoint("Kafka bootstrap")}
                               ).list_topics(timeout=10).topics
    assert topic not in first_topics
    # The control center: the switcher lists both; the second's topic once chosen.
    web = running.endpoint("Control center")
    with httpx.Client(base_url=web, timeout=10) as browser:
        assert f'<option value="{SECOND}">' in browser.get("/topics/").text
        wait_until("the second cluster's collector to sample the topic",
                   lambda: topic in browser.get("/topics/", params={"cluster": SECOND}).text)
        assert topic in browser.get("/topics/").text  # the session keeps the choice
        assert f'<option value="{SECOND}" selected>' in browser.get("/").text
        # Its own Connect worker, on its cluster; the Connect page shows the viewed one's.
        connect = running.endpoint(rf"Kafka Connect \({SECOND}\)")
        assert connect != running.endpoint("Kafka Connect")
        assert httpx.get(connect + "/", timeout=30).json()["kafka_cluster_id"] == second_id
        assert httpx.get(running.endpoint("Kafka Connect") + "/",
                         timeout=30).json()["kafka_cluster_id"] == first_id
        assert f"<code>{connect}</code>" in browser.get("/connect/").text
        assert (f"<code>{running.endpoint('Kafka Connect')}</code>"
                in browser.get("/connect/", params={"cluster": "millrace"}).text)
    # One lag metrics endpoint for both clusters, told apart by cluster_name.
    def latest(cluster: str) -> float | None:
        return next((sample.value for family in text_string_to_metric_families(
            get(running.endpoint("Lag metrics"))) for sample in family.samples
            if sample.name == "kafka_partition_latest_offset" and sample.labels == {
                "cluster_name": cluster, "topic": topic, "partition": "0"}), None)

    wait_until("the second cluster's offsets in the lag metrics", lambda: latest(SECOND) == 1)
    assert latest("millrace") is None  # the topic is the second cluster's only


def test_ctrl_c_stops_everything(running: Running) -> None:
    endpoints = endpoints_in(running.text)
    ports = [port_of(url) for name, url in endpoints.items()
             if name not in ("admin password", "Kafka bootstrap")]
    ports += [port_of(s) for s in endpoints["Kafka bootstrap"].split(",")]
    ports += [int(p) for row in BROKER_ROW.findall(running.text) for p in (row[2], row[4])]
    ports.append(port_of(running.endpoint(rf"Kafka bootstrap \({SECOND}\)")))
    ports.append(port_of(running.endpoint(rf"Kafka Connect \({SECOND}\)")))
    output = running.stop()
    assert running.proc.returncode == 0, output
    assert "cluster is [DOWN]" in output and f"cluster {SECOND} is [DOWN]" in output
    assert f"collector {SECOND} is [DOWN]" in output
    assert f"connect {SECOND} is [DOWN]" in output
    assert "celery worker is [DOWN]" in output and "celery beat is [DOWN]" in output
    assert "connect is [DOWN]" in output
    still = [p for p in ports if is_listening(p)]
    assert not still, f"still listening after Ctrl-C: {[(p, holders(p)) for p in still]}"


def holders(port: int) -> list[str]:
    """The processes holding a listening socket on `port` (pid and command line), from
    /proc: what a failure of the test above needs to say (a run once found the second
    cluster's Connect port listening after the platform printed it DOWN)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    found = []
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd) in inodes:
                pid = fd.parent.parent
                argv = (pid / "cmdline").read_bytes().split(b"\0")
                found.append(f"{pid.name}: {b' '.join(argv).decode(errors='replace')}")
        except OSError:
            continue
    return found or ["no listener in /proc/net/tcp: a connection to itself?"]


def child_pid(parent: int, argument: str, unless: str = "") -> int:
    """The pid of `parent`'s child process whose command line has `argument` (and not
    `unless`)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and argument.encode() in argv and unless.encode() not in argv:
            return int(stat.parent.name)
    raise AssertionError(f"no child of {parent} runs with {argument!r}")


def assert_admin_signs_in(web: str, password: str) -> None:
    """The password printed on first start opens the control center's login form."""
    with httpx.Client(base_url=web, timeout=10) as browser:
        form = browser.get("/login/").text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
        answer = browser.post("/login/", data={
            "username": "admin", "password": password, "csrfmiddlewaretoken": token,
            "next": "/audit/"})  # fmt: skip
        assert (answer.status_code, answer.headers.get("location")) == (302, "/audit/")


def run_printed(command: str) -> str:
    """Run a command line as the platform printed it, from the repository root."""
    done = subprocess.run(command.split(), cwd=REPO, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr
