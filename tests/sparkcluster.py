"""A Spark standalone cluster for tests: a master and N workers on 127.0.0.1 and free ports.

pyspark 4.x ships `bin/spark-class` and `sbin/spark-daemon.sh` but not `sbin/start-master.sh`;
start-master.sh only runs the master's class through them, so we run the Master and Worker
classes with `spark-class` in the foreground, as children of our own to stop. Used by the
control center's tests: a job through Celery on a master and worker (the same results as on
local[2]), and a master with no worker (a job that waits until cancelled)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from brokercluster.ports import free_port

SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 180  # two JVMs on a machine shared with other test runs

@dataclass(frozen=True)
class SparkCluster:
    url: str  # spark://127.0.0.1:PORT, what --master takes
    ui_port: int
    # Returns once the master answers with every worker registered (see spark_standalone).
    wait_up: Callable[[], None] = field(default=lambda: None, compare=False, repr=False)

    def state(self) -> dict[str, Any]:
        """The master's JSON status (`aliveworkers`, `completedapps`, ...); {} if it does
        not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/",
                                        timeout=2) as answer:
                return dict(json.load(answer))
        except OSError:
            return {}


@contextmanager
def spark_standalone(log_dir: Path, workers: int = 1, wait: bool = True
                     ) -> Iterator[SparkCluster]:  # fmt: skip
    """A master and `workers` workers (2 cores, 1 GB each), up and registered. With no
    worker, every job waits for resources: a job that runs until it is cancelled. With
    `wait=False` the block starts while the JVMs start (its URL is known at once) and
    calls `cluster.wait_up()` before it needs them."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(log_dir)}
    url, ui_port = f"spark://127.0.0.1:{free_port()}", free_port()
    procs = [_spark_class("org.apache.spark.deploy.master.Master", [
        "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1], "--webui-port", str(ui_port)],
        log_dir / "master.log", env)]
    for n in range(workers):
        procs.append(_spark_class("org.apache.spark.deploy.worker.Worker", [
            url, "--host", "127.0.0.1", "--cores", "2", "--memory", "1g",
            "--webui-port", str(free_port()), "--work-dir", str(log_dir / f"work{n}")],
            log_dir / f"worker{n}.log", env))
    deadline = time.monotonic() + START_TIMEOUT_S

    def wait_up() -> None:
        while not _up(cluster, workers):
            assert all(p.poll() is None for p in procs), _logs(log_dir, workers)
            assert time.monotonic() < deadline, "the Spark cluster did not come up\n" + \
                _logs(log_dir, workers)
            time.sleep(0.2)

    cluster = SparkCluster(url, ui_port, wait_up)
    try:
        if wait:
            wait_up()
        yield cluster
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _up(cluster: SparkCluster, workers: int) -> bool:
    state = cluster.state()
    return bool(state) and int(state.get("aliveworkers", 0)) >= workers


def _spark_class(name: str, args: list[str], log: Path, env: dict[str, str]
                 ) -> subprocess.Popen[bytes]:  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), name, *args],
                                stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the launcher's whole session (spark-class execs java, but be sure)."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _logs(log_dir: Path, workers: int) -> str:
    logs = [log_dir / "master.log", *(log_dir / f"worker{n}.log" for n in range(workers))]
    return "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-2000:]}"
                     for log in logs if log.exists())
