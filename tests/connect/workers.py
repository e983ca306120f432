"""Connect workers as real processes (`python -m connect --config ...`) on free ports, and
the small waits the tests share."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, TopicPartition

from brokercluster.ports import free_port
from tests.brokerproc import PortTaken

REPO = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """`scheme` https: its REST API serves TLS (its keystore in `extra`), trusted with the
    CA file `ca`."""

    def __init__(self, data_dir: Path, bootstrap: str, group: str,
                 extra: dict[str, str] | None = None,
                 auth: tuple[str, str] | None = None, scheme: str = "http",
                 ca: str | None = None, tree: Path = REPO) -> None:
        self.data_dir = data_dir
        self.tree = tree  # the source tree it runs from (benchmarks compare older trees)
        self.auth = auth  # Basic credentials, when its REST API asks for them
        self.scheme = scheme
        self.verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) \
            if ca else True
        self.port = free_port()
        self.props = {
            "bootstrap.servers": bootstrap, "group.id": group,
            "config.storage.topic": f"{group}-configs", "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1", "offset.storage.partitions": "3",
            "status.storage.partitions": "2", "listeners": self.url,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.flush.interval.ms": "500", "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000", **(extra or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = data_dir / f"worker-{self.port}.out"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self, timeout: float = 40) -> WorkerProcess:
        """Start the worker and wait until its REST API answers. The port was free when
        picked, but the worker binds it only after joining its group, seconds later: when
        another process took it meanwhile (seen once), start again on a new port."""
        for attempt in range(3):
            try:
                self._start_once(timeout)
                return self
            except PortTaken:
                if attempt == 2:
                    raise
                self.port = free_port()
                self.props["listeners"] = self.url
                self.output = self.data_dir / f"worker-{self.port}.out"
        return self

    def _start_once(self, timeout: float) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / f"worker-{self.port}.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "connect", "--config",
                                          str(config)], cwd=self.tree, stdout=out,
                                         stderr=subprocess.STDOUT)
        wait_for(lambda: self._answers(), timeout, f"the worker never answered:\n{self.log()}")

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            if "address already in use" in self.log().lower():
                raise PortTaken(self.port)
            raise RuntimeError(f"the worker exited:\n{self.log()}")
        try:
            response = httpx.get(self.url + "/", timeout=1, auth=self.auth,
                                 verify=self.verify)
        except httpx.HTTPError:
            return False
        # Whatever else took the port may answer too: only Connect's root names its cluster.
        return response.status_code == 200 and "kafka_cluster_id" in response.text

    def log(self) -> str:
        return self.output.read_text(errors="replace")[-6000:] if self.output.exists() else ""

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, auth=self.auth, verify=self.verify)

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(method, self.url + path, json=body, timeout=60, auth=self.auth,
                             verify=self.verify)


def wait_for(check: Callable[[], Any], timeout: float, message: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message or "timed out")
        time.sleep(0.2)


def read_topic(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    """Every committed record of `topic` (waiting until at least `expected` arrived)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    parts = wait_for(lambda: consumer.list_topics(topic, timeout=10).topics[topic].partitions,
                     timeout, f"topic {topic} never appeared")
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    values: list[bytes] = []
    deadline, quiet = time.monotonic() + timeout, 0
    while time.monotonic() < deadline and (len(values) < expected or quiet < 3):
        batch = consumer.consume(1000, 0.5)
        quiet = 0 if batch else quiet + 1
        values += [m.value() for m in batch if m.error() is None]
    consumer.close()
    return values
