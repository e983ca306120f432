"""Every command in README.md's ```sh blocks, run as a newcomer runs it, so the README
cannot drift from what works.

The commands are read from README.md, never listed here. The test runs them from the
repository root with only the README's conventional values mapped to the test's own, so
parallel runs never collide: ports (9092..9094, 8000, 8081, 8082, `--base-port`), the data
directory `var/` and `/tmp/kafka-logs`. `make run` becomes `make run PLATFORM_ARGS=...`
(free ports, a private data directory), and the single broker gets a free listener through
an extra `--override`, which wins over its config file.

A command either exits, and must exit 0, or prints that it is ready (a line with "ready",
"Producing" or "Press Ctrl-C") and keeps running: then it gets Ctrl-C (SIGINT to its process
group, as a terminal sends it) and must end cleanly. `make run` stays up while the commands
that need a running platform run; commands that start their own cluster or broker run once
it has had its Ctrl-C, each with its own data directory and free ports, while it stops (its
brokers' controlled shutdowns, Celery's exit), and its clean end is checked after them.
`make test` is the suite running this very test.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from brokercluster.ports import free_base_port, free_port
from tests.brokerproc import REPO

README = REPO / "README.md"
READY = ("ready", "Producing", "Press Ctrl-C")
SERVING = re.compile(r"^millrace (cluster|broker \d+) ready\b", re.MULTILINE)
SECURED = "tests/millrace/test_platform_secure.py starts a secured platform from a fresh data " \
    "dir and runs kcat -F on its client config"
SKIPPED = {"make test": "the suite that runs this test",
           "make run PLATFORM_ARGS=--secure": SECURED,
           "kcat -F var/secure/client.properties -L": SECURED,
           "echo hello | kcat -F var/secure/client.properties -P -t demo": SECURED}
# Commands that start their own cluster or broker: they run once the platform has had its Ctrl-C.
# (`python -m brokercluster --brokers ...` or `python -m brokercore --config ...`.)
OWN_SERVER = re.compile(r"-m \w+ ((cluster )?--brokers|--config)\b")
ENDPOINT = re.compile(r"^\s+(Kafka bootstrap|Control center|Schema registry|REST proxy)\s+"
                      r"(?:http://)?(\S+?)/?(?:\s|$)", re.MULTILINE)


def readme_commands() -> list[str]:
    """Each line of each ```sh block, without its trailing `# comment`."""
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL)
    lines = [re.sub(r"\s+#\s.*$", "", line).strip() for block in blocks
             for line in block.splitlines()]
    return [line for line in lines if line]


@dataclass
class Mapping:
    """The README's conventional values and what they are in this test run."""

    var: Path
    ports: dict[int, int] = field(default_factory=dict)

    def apply(self, command: str) -> str:
        command = re.sub(r"(127\.0\.0\.1|localhost):(\d+)",
                         lambda m: f"{m[1]}:{self.ports.get(int(m[2]), int(m[2]))}", command)
        command = re.sub(r"--base-port \d+", f"--base-port {free_base_port(3)}", command)
        command = re.sub(r"(?<![\w/])var/", f"{self.var}/", command)
        command = command.replace("/tmp/kafka-logs", str(self.var / "kafka-logs"))
        if command.startswith("make run"):
            command += f" PLATFORM_ARGS='--any-port --data-dir {self.var}'"
        if re.search(r"-m \w+ --config\b", command):
            command += f" --override listeners=PLAINTEXT://127.0.0.1:{free_port()}"
        return command


@dataclass
class Running:
    command: str
    proc: subprocess.Popen[str]
    output: Path
    interrupted: bool = False

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def ctrl_c(self) -> None:
        """Ctrl-C, as a terminal sends it to the foreground process group."""
        os.killpg(self.proc.pid, signal.SIGINT)
        self.interrupted = True

    def interrupt(self) -> int:
        self.ctrl_c()
        return self.wait_after_ctrl_c()

    def wait_after_ctrl_c(self) -> int:
        try:
            return self.proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(
                f"{self.command!r} ignored Ctrl-C:\n{self.text()[-3000:]}") from None


def start(command: str, env: dict[str, str], log: Path) -> Running:
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "-c", command], cwd=REPO, env=env, text=True,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return Running(command, proc, log)


def run(command: str, env: dict[str, str], log: Path, timeout: float = 240) -> Running | None:
    """Run until it exits (it must exit 0: None) or says it is ready (its `Running`)."""
    running = start(command, env, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running.proc.poll() is not None:
            assert running.proc.returncode == 0, f"{command!r}:\n{running.text()[-3000:]}"
            return None
        text = running.text()
        # Lines only a command that keeps running prints last: the platform's, and a
        # broker's or a cluster's once it serves (`stop` checks it is still running).
        if "Press Ctrl-C" in text or SERVING.search(text):
            return running
        if any(marker in text for marker in READY):
            try:  # a short command may say "ready" just before it ends
                running.proc.wait(3)
            except subprocess.TimeoutExpired:
                return running
            continue
        time.sleep(0.2)
    running.interrupt()
    raise AssertionError(f"{command!r} neither ended nor got ready:\n{running.text()[-3000:]}")


def stop(running: Running) -> None:
    ctrl_c_while_serving(running)
    assert_ended_cleanly(running)


def ctrl_c_while_serving(running: Running) -> None:
    assert running.proc.poll() is None, f"{running.command!r} ended before its Ctrl-C:\n" \
        f"{running.text()[-3000:]}"
    running.ctrl_c()


def assert_ended_cleanly(running: Running) -> None:
    code = running.wait_after_ctrl_c()
    # make reports its own interruption; what it ran must have stopped cleanly.
    assert code in (0, -signal.SIGINT, 2, 130), f"{running.command!r} exited {code}"
    assert "Traceback" not in running.text(), running.text()[-3000:]


def platform_ports(text: str) -> dict[int, int]:
    found = dict(ENDPOINT.findall(text))
    brokers = [int(b.rsplit(":", 1)[1]) for b in found["Kafka bootstrap"].split(",")]
    port = {name: int(value.rsplit(":", 1)[1]) for name, value in found.items()
            if name != "Kafka bootstrap"}
    return {9092: brokers[0], 9093: brokers[1], 9094: brokers[2], 8000: port["Control center"],
            8081: port["Schema registry"], 8082: port["REST proxy"]}


@contextmanager
def platform(command: str, mapping: Mapping, env: dict[str, str], logs: Path
             ) -> Iterator[tuple[dict[str, str], Running]]:
    """The platform serving, for the block; the block may give it its Ctrl-C
    (`ctrl_c_while_serving`) and go on while it stops. Leaving the block waits for its
    clean end, after a Ctrl-C there if the block gave none."""
    running = run(mapping.apply(command), env, logs / "platform.log")
    assert running is not None, "make run ended instead of serving"
    try:
        mapping.ports = platform_ports(running.text())
        bootstrap = ",".join(f"127.0.0.1:{mapping.ports[p]}" for p in (9092, 9093, 9094))
        yield {**env, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}, running
    finally:
        if not running.interrupted:
            ctrl_c_while_serving(running)
        assert_ended_cleanly(running)


@pytest.mark.slow
def test_every_readme_command_works(tmp_path: Path) -> None:
    commands = readme_commands()
    assert "make run" in commands
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    with_platform = [c for c in commands if c not in SKIPPED and c != "make run"
                     and not OWN_SERVER.search(c)]
    own_server = [c for c in commands if OWN_SERVER.search(c)]
    mapping = Mapping(tmp_path / "platform")
    with platform("make run", mapping, env, tmp_path) as (platform_env, serving):
        for i, command in enumerate(with_platform):
            ran = run(mapping.apply(command), platform_env, tmp_path / f"with-{i}.log")
            if ran is not None:
                stop(ran)
        # The platform's stop (8-20 s, mostly waiting) overlaps the commands that start
        # their own cluster or broker; its clean end is checked when the block ends.
        ctrl_c_while_serving(serving)
        for i, command in enumerate(own_server):
            own = Mapping(tmp_path / f"own-{i}")
            ran = run(own.apply(command), env, tmp_path / f"own-{i}.log")
            assert ran is not None, f"{command!r} ended instead of serving"
            stop(ran)
