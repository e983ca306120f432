"""Run built-in brokers as real OS processes for tests: start, stop, kill -9, restart."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """A `python -m brokercore` child with its own log dir and a fixed port across restarts."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None,
                 node_id: int = 1) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.node_id = node_id
        self.overrides = {
            "node.id": str(node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data_dir / "logs"),
            # Tests do not wait for late joiners; Kafka's test configs do the same.
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "4",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = data_dir / "broker.out"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "brokercore"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log()}")
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
