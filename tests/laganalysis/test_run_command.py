"""python -m laganalysis.run as a process, as Celery and spark-submit start it: bad parameters
refused before Spark starts, and SIGTERM cancelling the running job and leaving nothing behind.

Apart from `test_run_cli.py` (the same body, `execute`, on the tests' shared Spark session):
these start the command with its own JVM and never use that session, so they are no part of
the unit that runs on it (`SHARED_JVM_FILES` in tests/conftest.py) and run on the other
pytest worker meanwhile."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.laganalysis.history import write_samples
from tests.laganalysis.test_run_cli import busy_rows, events

REPO = Path(__file__).resolve().parents[2]


def start(job: str, params: dict[str, Any], out: Path, master: str = "local[1]") -> Any:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "laganalysis.run",
            job,
            "--params",
            json.dumps(params),
            "--out",
            str(out),
            "--master",
            master,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(("job", "params", "word"), [
    ("sla", {"samples_path": "x", "objective": 7}, "objective"),
    ("hot_partitions", {"bootstrap": "x"}, "topics"),
])  # fmt: skip
def test_bad_parameters_exit_2_with_a_message_before_spark_starts(
    tmp_path: Path, job: str, params: dict[str, Any], word: str
) -> None:
    out = tmp_path / "result.json"
    proc = start(job, params, out)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert events(stdout) == [{"event": "error", "error": "ParamError",
                               "message": events(stdout)[0]["message"]}]
    assert word in events(stdout)[0]["message"]
    assert "SparkContext" not in stderr and "log4j" not in stderr  # no JVM was started
    assert not out.exists()


def test_sigterm_cancels_the_running_job_and_leaves_no_result(tmp_path: Path) -> None:
    samples = write_samples(tmp_path / "big.jsonl", busy_rows(200_000))  # seconds of work
    out = tmp_path / "result.json"
    proc = start("lag_summary", {"samples_path": samples}, out)
    assert proc.stdout is not None
    deadline = time.monotonic() + 600
    for line in proc.stdout:
        if '"progress"' in line and json.loads(line)["tasks_total"] > 0:
            break
        assert time.monotonic() < deadline
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, rest[-2000:]
    assert events(rest)[-1] == {"event": "cancelled"}
    assert not out.exists() and list(tmp_path.iterdir()) == [tmp_path / "big.jsonl"]
