"""Run built-in brokers as real OS processes for tests: start, stop, kill -9, restart.

`BrokerProcess` is one broker on its own; `ClusterProcess` is a cluster of them under
`python -m brokercluster`, operated through the supervisor's control socket.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from brokercluster import control
from brokercluster.layout import SOCKET_NAME
from brokercluster.ports import free_base_port, free_port

REPO = Path(__file__).resolve().parent.parent


class PortTaken(RuntimeError):
    """A test process could not bind a port found free for it: another process (often an
    outgoing connection, from the same ephemeral range) took it in between."""


class BrokerProcess:
    """A `python -m brokercore` child with its own log dir and a fixed port across restarts."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None,
                 node_id: int = 1, args: list[str] | None = None, tree: Path = REPO) -> None:
        self.data_dir = data_dir
        self.tree = tree  # the source tree it runs from (benchmarks compare older trees)
        self.args = args or []  # more command-line arguments (--add-scram)
        self.port = free_port()
        self.node_id = node_id
        self.overrides = {
            "node.id": str(node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data_dir / "logs"),
            # Tests do not wait for late joiners; Kafka's test configs do the same.
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.num.partitions": "4",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = data_dir / "broker.out"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "brokercore", *self.args]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        with open(self.output, "ab") as out:
            env = None if self.tree == REPO else {**os.environ, "PYTHONPATH": str(self.tree)}
            self.proc = subprocess.Popen(args, cwd=self.tree, stdout=out, stderr=subprocess.STDOUT,
                                         env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log()
                failure = PortTaken if "address already in use" in log else RuntimeError
                raise failure(f"broker exited with {self.proc.returncode}:\n{log}")
            if self._accepting():
                return self
            time.sleep(0.05)
        raise TimeoutError(f"broker did not start in {timeout}s:\n{self.log()}")

    def _accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return b"ready on" in self.output.read_bytes()
        except OSError:
            return False

    def log(self) -> str:
        return self.output.read_text(errors="replace")[-5000:] if self.output.exists() else ""

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: a clean shutdown."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int:
        """SIGKILL: a crash at whatever moment the broker is in."""
        return self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: int, timeout: float) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        os.kill(self.proc.pid, sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()


class ClusterActionError(Exception):
    """The supervisor refused an action; the message is its answer."""


def die_with_test_run() -> None:
    # A crashed test run must not leave a supervisor (and so its brokers) behind.
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ClusterProcess:
    """A `python -m brokercluster` supervisor with N brokers on free ports.

        with ClusterProcess(tmp_path, brokers=3, overrides={"min.insync.replicas": "2"}) as c:
            producer = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap})
            c.kill(2)              # SIGKILL; broker 2 stays down
            c.start(2)             # returns once broker 2 says it is ready
            c.status()["brokers"]  # what `cluster status --json` prints

    Node ids are 1..N. `kill`, `stop`, `pause`, `resume`, `start` and `restart` go through
    the control socket as the CLI does, return the supervisor's entry for that broker and
    raise ClusterActionError when it refuses. `close()` (or leaving the `with`) sends
    SIGTERM to the supervisor, which stops every broker.
    """

    def __init__(self, data_dir: Path, brokers: int = 3,
                 overrides: dict[str, str] | None = None, args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.brokers = brokers
        self.args = args or []  # more command-line arguments (--add-scram)
        self.base_port = free_base_port(brokers)
        self.overrides = {
            # Tests do not wait for late joiners; Kafka's test configs do the same.
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.num.partitions": "4",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = data_dir / "supervisor.out"

    def __enter__(self) -> ClusterProcess:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        """Every broker's Kafka listener, comma-separated, as clients take it."""
        return ",".join(self.bootstrap_of(i) for i in range(1, self.brokers + 1))

    def bootstrap_of(self, node_id: int) -> str:
        return f"127.0.0.1:{self.base_port + node_id - 1}"

    def open(self, timeout: float = 90.0) -> ClusterProcess:
        """Start the supervisor and return once every broker is ready."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "brokercluster", "--brokers", str(self.brokers),
                "--base-port", str(self.base_port), "--data-dir", str(self.data_dir), *self.args]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        with open(self.output, "ab") as out:
            offset = out.tell()  # a data dir used before holds an earlier "ready"
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                         preexec_fn=die_with_test_run)
        deadline = time.monotonic() + timeout
        while b"millrace cluster ready" not in self.output.read_bytes()[offset:]:
            if self.proc.poll() is not None:
                raise RuntimeError(f"supervisor exited with {self.proc.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster not ready in {timeout}s:\n{self.log()}")
            time.sleep(0.1)
        return self

    def log(self) -> str:
        """The end of the supervisor's output (each broker's is in data_dir/logs/)."""
        return self.output.read_text(errors="replace")[-5000:] if self.output.exists() else ""

    def broker_log(self, node_id: int) -> str:
        path = self.data_dir / "logs" / f"broker-{node_id}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        return control.request(self.data_dir / SOCKET_NAME, message)

    def status(self) -> dict[str, Any]:
        """`{"active_controller": id | None, "bootstrap": ..., "brokers": [{"id", "pid",
        "state", "exit_code", "kafka_port", "controller_port", "sees", "leaders", ...}]}`"""
        return self.request({"action": "status"})

    def broker(self, node_id: int) -> dict[str, Any]:
        return next(b for b in self.status()["brokers"] if b["id"] == node_id)

    def _act(self, action: str, node_id: int) -> dict[str, Any]:
        answer = self.request({"action": action, "id": node_id})
        if not answer["ok"]:
            raise ClusterActionError(answer["error"])
        broker: dict[str, Any] = answer["broker"]
        return broker

    def kill(self, node_id: int) -> dict[str, Any]:
        """SIGKILL: a crash at whatever moment the broker is in."""
        return self._act("kill", node_id)

    def stop(self, node_id: int) -> dict[str, Any]:
        """SIGTERM and wait: a clean (controlled) shutdown."""
        return self._act("stop", node_id)

    def pause(self, node_id: int) -> dict[str, Any]:
        """SIGSTOP: the broker is frozen, its sockets stay open."""
        return self._act("pause", node_id)

    def resume(self, node_id: int) -> dict[str, Any]:
        return self._act("resume", node_id)

    def start(self, node_id: int) -> dict[str, Any]:
        """Start a stopped or killed broker; returns once it is ready."""
        return self._act("start", node_id)

    def restart(self, node_id: int) -> dict[str, Any]:
        return self._act("restart", node_id)

    def close(self, timeout: float = 60.0) -> int:
        """SIGTERM the supervisor, which stops every broker; its exit status."""
        if self.proc is None:
            return 0
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # its brokers die with it (PR_SET_PDEATHSIG)
            return self.proc.wait()
