"""The README's first command: the platform starts the cluster and every endpoint, offers
the failover commands that work, and stops everything cleanly."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import httpx
import pytest

from tests.brokerproc import REPO
from tests.compat.clients import new_topic


def wait_for_endpoints(proc: subprocess.Popen[str], timeout: float = 90) -> dict[str, str]:
    lines = wait_for_output(proc, timeout)
    text = "".join(lines)
    endpoints = {
        name: re.search(rf"{name}\s+(\S+)", text).group(1)  # type: ignore[union-attr]
        for name in ("Kafka bootstrap", "Control center", "Schema registry", "REST proxy")
    }
    admin = re.search(r"Admin login\s+user admin, password (\S+)  \(shown only this once\)", text)
    if admin:
        endpoints["admin password"] = admin.group(1)
    return endpoints


def wait_for_output(proc: subprocess.Popen[str], timeout: float = 90) -> list[str]:
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


def platform(data_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    return subprocess.Popen(
        [sys.executable, "manage.py", "platform", "--any-port", "--data-dir", str(data_dir),
         *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def assert_an_analysis_runs(web: str, password: str, topic: str) -> None:
    """The platform's own Celery worker runs a Spark job launched through the API."""
    auth = ("admin", password)
    launched = httpx.post(f"{web}api/v1/analysis", auth=auth, timeout=30,
                          json={"job": "hot_partitions", "topics": [topic]})
    assert launched.status_code == 202, launched.text
    run = f"{web}api/v1/analysis/{launched.json()['id']}"
    deadline = time.monotonic() + 300
    while (status := httpx.get(run, auth=auth).json()["status"]) in ("QUEUED", "RUNNING"):
        assert time.monotonic() < deadline, f"the analysis is still {status}"
        time.sleep(1)
    assert status == "SUCCEEDED", httpx.get(run, auth=auth).json()["error"]
    rows = httpx.get(f"{run}/results", auth=auth).json()["tables"]["partitions"]["rows"]
    assert sum(r["messages"] for r in rows) == 1


def test_platform_serves_every_endpoint_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    # One broker keeps this quick; the next test runs the default cluster.
    proc = platform(tmp_path, "--brokers", "1")
    try:
        endpoints = wait_for_endpoints(proc)
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
        ports = [port_of(url) for name, url in endpoints.items() if name != "admin password"]
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output
    assert "cluster is [DOWN]" in output
    assert "celery worker is [DOWN]" in output and "celery beat is [DOWN]" in output
    assert not [p for p in ports if is_listening(p)], "something still listens after Ctrl-C"


@pytest.mark.slow  # three brokers, migrate, the web server, and a broker restart: ~20-30 s here
def test_platform_runs_three_brokers_and_its_failover_commands_work(tmp_path: Path) -> None:
    proc = platform(tmp_path)
    try:
        text = "".join(wait_for_output(proc))
        bootstrap = re.search(r"Kafka bootstrap\s+(\S+)", text).group(1)  # type: ignore[union-attr]
        servers = bootstrap.split(",")
        assert len(servers) == 3
        commands = [line.split("#")[0].strip() for line in text.splitlines()
                    if " -m brokercluster " in line]
        by_action = {c.split(" -m brokercluster ")[1].split(" --data-dir")[0]: c for c in commands}
        assert set(by_action) == {"status", "kill 2", "start 2", "restart 1"}

        web = re.search(r"Control center\s+(\S+)", text).group(1)  # type: ignore[union-attr]
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
        os.kill(child_pid(proc.pid, "collect"), signal.SIGSEGV)
        topic = new_topic("after-crash")
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([confluent_kafka.admin.NewTopic(topic, 1, 3)])[topic].result(30)
        deadline = time.monotonic() + 60
        while topic not in (overview := get(web)):
            assert time.monotonic() < deadline, overview
            time.sleep(1)
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output
    assert "collector exited (code -11); restarting it" in output, output
    assert not [s for s in servers if is_listening(port_of(s))], "a broker outlived Ctrl-C"


def child_pid(parent: int, argument: str) -> int:
    """The pid of `parent`'s child process whose command line has `argument`."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and argument.encode() in argv:
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
