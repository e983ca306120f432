"""The README's first command: the platform starts, serves every endpoint, stops cleanly."""

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

from tests.brokerproc import REPO
from tests.compat.clients import new_topic


def wait_for_endpoints(proc: subprocess.Popen[str], timeout: float = 90) -> dict[str, str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "Press Ctrl-C to stop." in line:
            text = "".join(lines)
            return {
                name: re.search(rf"{name}\s+(\S+)", text).group(1)  # type: ignore[union-attr]
                for name in ("Kafka bootstrap", "Control center", "Schema registry", "REST proxy")
            }
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


def test_platform_serves_every_endpoint_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "platform", "--any-port", "--data-dir", str(tmp_path)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        endpoints = wait_for_endpoints(proc)
        topic = new_topic("platform")
        producer = confluent_kafka.Producer({"bootstrap.servers": endpoints["Kafka bootstrap"]})
        producer.produce(topic, b"hello")
        assert producer.flush(20) == 0

        assert topic in get(endpoints["Control center"])
        assert get(endpoints["Schema registry"] + "/subjects") == "[]"
        assert topic in get(endpoints["REST proxy"] + "/topics")
        ports = [port_of(endpoints[name]) for name in endpoints]
    finally:
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output
    assert "broker 1 is [DOWN]" in output
    assert not [p for p in ports if is_listening(p)], "something still listens after Ctrl-C"
