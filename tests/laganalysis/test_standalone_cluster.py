"""The same job on a Spark standalone cluster (a master and one worker started from the
launcher shipped inside the pyspark package, on 127.0.0.1 and free ports) gives the same result
as on local[*]."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from brokercluster.ports import free_port
from tests.laganalysis.history import catching_up_group, draining_group, write_samples
from tests.laganalysis.test_run_cli import start

SPARK_HOME = Path(pyspark.__file__).parent
pytestmark = pytest.mark.slow


def spark_class(name: str, args: list[str], log: Path, env: dict[str, str]) -> Any:
    # pyspark 4.3 ships bin/spark-class and sbin/spark-daemon.sh but not sbin/start-master.sh;
    # start-master.sh only runs this class through them, and a foreground child is ours to stop.
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), name, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def master_state(ui_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            state: dict[str, Any] = json.load(r)
            return state
    except OSError:
        return {}


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[tuple[str, int]]:
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(tmp_path),
    }
    port, ui = free_port(), free_port()
    master = spark_class(
        "org.apache.spark.deploy.master.Master",
        ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
        tmp_path / "master.log",
        env,
    )
    worker = spark_class(
        "org.apache.spark.deploy.worker.Worker",
        [
            f"spark://127.0.0.1:{port}",
            "--host",
            "127.0.0.1",
            "--cores",
            "2",
            "--memory",
            "1g",
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        tmp_path / "worker.log",
        env,
    )
    try:
        deadline = time.monotonic() + 180
        while master_state(ui).get("aliveworkers", 0) < 1:
            assert master.poll() is None and worker.poll() is None, "master or worker exited"
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(1)
        yield f"spark://127.0.0.1:{port}", ui
    finally:
        for proc in (worker, master):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_a_job_on_a_standalone_cluster_matches_local(
    tmp_path: Path, standalone: tuple[str, int]
) -> None:
    url, ui = standalone
    samples = write_samples(tmp_path / "s.jsonl", [*catching_up_group(), *draining_group()])
    results = {}
    for master in ("local[2]", url):
        out = tmp_path / f"{master.split(':')[0]}.json"
        proc = start("eta", {"samples_path": samples}, out, master=master)
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, (stdout + stderr)[-3000:]
        results[master] = json.loads(out.read_text())["tables"]
    assert results["local[2]"] == results[url]
    groups = {r["group"]: r for r in results[url]["groups"]["rows"]}
    assert groups["g2"]["eta_seconds"] == 500.0
    apps = [app["name"] for app in master_state(ui).get("completedapps", [])]
    assert apps == ["millrace-eta"]
