"""The cluster command as an operator meets it: real supervisor, real brokers, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.metadata import MetadataRequest

from brokercluster.client import ActionRefused, BrokerState, NoSupervisor, SupervisorClient
from tests.brokercore.wire import WireClient
from tests.brokerproc import REPO, ClusterActionError, ClusterProcess


def cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brokercluster", *args, "--data-dir", str(data_dir)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )


def cli_json(data_dir: Path, *args: str) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(cli(data_dir, *args, "--json").stdout)
    return answer


def process_state(pid: int) -> str | None:
    """The kernel's one-letter state of `pid` (R, S, T, ...), None once it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else state


def wait_until_gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if process_state(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def brokers_answering(bootstrap: str) -> list[int]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return sorted(metadata.brokers)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path_factory.mktemp("cluster"), brokers=3) as c:
        yield c


@pytest.fixture(autouse=True)
def all_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test that uses the shared cluster leaves every broker running."""
    yield
    if "cluster" in request.fixturenames:
        c: ClusterProcess = request.getfixturevalue("cluster")
        for b in c.status()["brokers"]:
            if b["state"] == "paused":
                c.resume(b["id"])
            elif b["state"] != "running":
                c.start(b["id"])


def test_status_shows_every_broker_with_its_pid_ports_and_state(cluster: ClusterProcess) -> None:
    status = cli_json(cluster.data_dir, "status")
    assert status["ok"]
    assert status["bootstrap"] == cluster.bootstrap
    assert status["active_controller"] in (1, 2, 3)
    for b, node_id in zip(status["brokers"], (1, 2, 3), strict=True):
        assert b["id"] == node_id
        assert b["state"] == "running"
        assert process_state(b["pid"]) in ("R", "S", "D")
        assert b["kafka_port"] == cluster.base_port + node_id - 1
        assert b["controller_port"] == cluster.base_port + 100 + node_id - 1
        assert node_id in b["sees"]
    text = cli(cluster.data_dir, "status").stdout
    assert f"bootstrap servers: {cluster.bootstrap}" in text
    rows = [line.split() for line in text.splitlines() if line[:3].strip().isdigit()]
    assert [row[:3] for row in rows] == [
        [str(b["id"]), "running", str(b["pid"])] for b in status["brokers"]
    ]


def test_every_broker_sees_the_others_and_agrees_on_the_controller(
    cluster: ClusterProcess,
) -> None:
    active = wait_for_controller(cluster)
    brokers = cluster.status()["brokers"]
    assert [b["sees"] for b in brokers] == [[1, 2, 3]] * 3
    assert [b["id"] for b in brokers if b["active_controller"]] == [active]
    assert len({b["cluster_id"] for b in brokers}) == 1
    assert brokers_answering(cluster.bootstrap_of(3)) == [1, 2, 3]  # and so does librdkafka


def test_status_names_a_new_active_controller_when_the_old_one_is_killed(
    cluster: ClusterProcess,
) -> None:
    old = wait_for_controller(cluster)
    cluster.kill(old)
    new = wait_for_controller(cluster, other_than=old)
    assert new != old
    assert cluster.broker(new)["state"] == "running"


def wait_for_controller(cluster: ClusterProcess, other_than: int | None = None,
                        timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        active = cluster.status()["active_controller"]
        if active is not None and active != other_than:
            return int(active)
        time.sleep(0.2)
    raise AssertionError(f"no active controller other than {other_than}:\n{cluster.status()}")


def test_a_killed_broker_stays_down_until_started(cluster: ClusterProcess) -> None:
    pid = cluster.broker(2)["pid"]
    done = cli(cluster.data_dir, "kill", "2")
    assert done.returncode == 0, done.stderr
    assert "broker 2 killed" in done.stdout
    assert process_state(pid) is None
    assert cluster.broker(2)["state"] == "killed"
    assert brokers_answering(cluster.bootstrap_of(1))  # the others serve on

    started = cli_json(cluster.data_dir, "start", "2")
    assert started["ok"], started
    assert started["broker"]["state"] == "running"
    assert started["broker"]["pid"] != pid
    assert 2 in brokers_answering(cluster.bootstrap_of(2))


def test_pause_freezes_a_broker_and_resume_thaws_it(cluster: ClusterProcess) -> None:
    pid = cluster.pause(3)["pid"]
    assert process_state(pid) == "T"
    assert cluster.broker(3)["state"] == "paused"
    assert cluster.resume(3)["state"] == "running"
    assert process_state(pid) in ("R", "S", "D")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_of(3)})
    producer.produce("cli-after-resume", b"v")
    assert producer.flush(30) == 0


def test_stop_is_a_clean_shutdown_and_restart_brings_it_back(cluster: ClusterProcess) -> None:
    pid = cluster.broker(1)["pid"]
    stopped = cluster.stop(1)
    assert stopped["state"] == "stopped"
    assert stopped["exit_code"] == 0
    assert process_state(pid) is None
    assert "node 1: stopped" in cluster.broker_log(1)
    cluster.start(1)
    restarted = cluster.restart(1)
    assert restarted["state"] == "running"
    assert cluster.broker_log(1).count("node 1: stopped") == 2


def test_a_broker_that_dies_on_its_own_is_reported_and_not_restarted(
    cluster: ClusterProcess,
) -> None:
    pid = cluster.broker(2)["pid"]
    os.kill(pid, signal.SIGKILL)  # not through the supervisor: a crash
    deadline = time.monotonic() + 10
    while (b := cluster.broker(2))["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (b["state"], b["exit_code"], b["state_text"]) == ("exited", -9, "exited on SIGKILL")
    assert "broker 2 exited on SIGKILL" in cluster.log()


def test_bad_requests_get_clear_errors_and_change_nothing(cluster: ClusterProcess) -> None:
    unknown = cli(cluster.data_dir, "kill", "7")
    assert unknown.returncode == 1
    assert "unknown broker id 7; this cluster has brokers 1..3" in unknown.stderr
    with pytest.raises(ClusterActionError, match="cannot resume broker 1: it is running"):
        cluster.resume(1)
    with pytest.raises(ClusterActionError, match="broker 1 is already running"):
        cluster.start(1)
    assert cli(cluster.data_dir, "kill").returncode == 2  # no id: a usage error

    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(cluster.data_dir / "cluster.sock"))
        s.sendall(b'not json\n{"action": "kill", "id": "1"}\n[1]\n{"action": "fly"}\n')
        time.sleep(0.5)
        answers = [json.loads(line) for line in s.recv(65536).splitlines()]
    assert [a["ok"] for a in answers] == [False] * 4
    assert "unknown broker id '1'" in answers[1]["error"]
    assert all(b["state"] == "running" for b in cluster.status()["brokers"])


def test_no_supervisor_is_a_clear_error(tmp_path: Path) -> None:
    result = cli(tmp_path, "status")
    assert result.returncode == 1
    assert f"no cluster supervisor running at {tmp_path}" in result.stderr


def test_sigterm_stops_every_broker_cleanly(tmp_path: Path) -> None:
    c = ClusterProcess(tmp_path, brokers=2).open()
    pids = [b["pid"] for b in c.status()["brokers"]]
    c.pause(2)  # a paused broker too must get its SIGTERM
    assert c.close() == 0
    assert wait_until_gone(pids) == []
    assert "millrace cluster stopped" in c.log()
    assert "node 1: stopped" in c.broker_log(1)
    assert "node 2: stopped" in c.broker_log(2)
    assert not (tmp_path / "cluster.sock").exists()


def test_no_broker_outlives_a_supervisor_killed_with_sigkill(tmp_path: Path) -> None:
    c = ClusterProcess(tmp_path, brokers=2).open()
    pids = [b["pid"] for b in c.status()["brokers"]]
    c.pause(1)  # SIGTERM would never reach a stopped process; PR_SET_PDEATHSIG is SIGKILL
    assert c.proc is not None
    c.proc.kill()
    c.proc.wait()
    assert wait_until_gone(pids) == []
    # A new supervisor takes over the data directory despite the stale socket.
    with ClusterProcess(tmp_path, brokers=2) as again:
        assert [b["state"] for b in again.status()["brokers"]] == ["running", "running"]


def test_the_typed_client_reports_states_and_acts_on_a_broker(cluster: ClusterProcess) -> None:
    client = SupervisorClient(cluster.data_dir)
    status = client.status()
    assert status.bootstrap == cluster.bootstrap
    assert [b.node_id for b in status.brokers] == [1, 2, 3]
    assert all(b.state is BrokerState.RUNNING and b.pid for b in status.brokers)
    assert client.pause(3).state is BrokerState.PAUSED
    assert client.status().broker(3).state is BrokerState.PAUSED
    assert client.resume(3).state is BrokerState.RUNNING
    with pytest.raises(ActionRefused, match="unknown broker id"):
        client.kill(9)


def test_the_typed_client_says_when_no_supervisor_runs(tmp_path: Path) -> None:
    client = SupervisorClient(tmp_path)
    assert not client.available()
    with pytest.raises(NoSupervisor):
        client.status()


def test_requests_reaching_a_stopping_broker_are_answered_or_closed_at_once(
    cluster: ClusterProcess,
) -> None:
    """While SIGTERM stops broker 2 (controlled shutdown, then its listener drains), clients
    keep sending it requests: each is answered, or its connection fails (closed, reset or
    refused) at once, never held until a client's timeout (brokercore/README.md)."""
    requests = [
        (lambda: ListGroupsRequest(states_filter=[]), 4),
        (lambda: DescribeGroupsRequest(groups=["cli-group"],
                                       include_authorized_operations=False), 5),
        (lambda: MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                 include_topic_authorized_operations=False), 9),
    ]
    done = threading.Event()
    took: list[tuple[float, str]] = []

    def probe(make: Callable[[], Any], version: int) -> None:
        client: WireClient | None = None
        while not done.is_set():
            start = time.monotonic()
            try:
                client = client or WireClient(cluster.bootstrap_of(2), timeout=10.0)
                client.request(make(), version)
                outcome = "answered"
            except OSError as exc:  # closed, reset, refused, or held past the timeout
                outcome = type(exc).__name__
                if client is not None:
                    client.close()
                client = None
                time.sleep(0.05)
            took.append((time.monotonic() - start, outcome))
        if client is not None:
            client.close()

    probes = [threading.Thread(target=probe, args=r) for r in requests]
    for t in probes:
        t.start()
    time.sleep(0.5)
    try:
        assert cluster.stop(2)["state"] == "stopped"
        time.sleep(0.5)
    finally:
        done.set()
        for t in probes:
            t.join(30)
    assert any(outcome == "answered" for _, outcome in took)
    assert any(outcome != "answered" for _, outcome in took)  # it did stop under them
    slowest = max(took)
    # Generous for a loaded machine; a request held until it is dropped takes the 10 s.
    assert slowest[0] < 5.0, slowest
