"""python -m laganalysis.run as Celery and spark-submit use it: progress lines, an atomic
result file, readable failures, and cancellation by signal leaving nothing behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from laganalysis.burrow import Status
from laganalysis.records import LagSample
from tests.laganalysis.history import T0, catching_up_group, write_samples

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


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_a_run_reports_progress_and_writes_its_result(tmp_path: Path) -> None:
    samples = write_samples(tmp_path / "s.jsonl", catching_up_group())
    out = tmp_path / "out" / "result.json"
    proc = start("eta", {"samples_path": samples}, out)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    lines = events(stdout)
    progress = [e for e in lines if e["event"] == "progress"]
    assert any(e["tasks_total"] > 0 for e in progress)
    # The last counts before the ending are the final ones: every stage that ran is done,
    # and stages Spark skipped (their shuffle output reused) are counted apart.
    assert lines[-2] == progress[-1]
    final = progress[-1]
    assert final["stages_total"] > 0 and final["stages_done"] == final["stages_total"], final
    assert final["tasks_done"] == final["tasks_total"], final
    assert lines[-1] == {"event": "done", "out": str(out)}
    result = json.loads(out.read_text())
    assert result["job"] == "eta" and result["params"] == {"samples_path": samples}
    (group,) = result["tables"]["groups"]["rows"]
    assert group["group"] == "g1" and group["progress"] == "never"
    assert list(out.parent.iterdir()) == [out]


def test_bad_parameters_exit_2_with_a_message_and_no_result(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = start("sla", {"samples_path": str(tmp_path), "objective": 7}, out)
    stdout, _ = proc.communicate(timeout=600)
    assert proc.returncode == 2
    assert events(stdout)[-1]["error"] == "ParamError" and "objective" in stdout
    assert not out.exists()


def test_a_spark_failure_is_readable_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = start("lag_summary", {"samples_path": str(tmp_path / "missing")}, out)
    stdout, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1
    error = events(stdout)[-1]
    assert error["event"] == "error" and "PATH_NOT_FOUND" in error["message"]
    assert "\tat org.apache" not in error["message"]
    assert not out.exists()


def test_sigterm_cancels_the_running_job_and_leaves_no_result(tmp_path: Path) -> None:
    rows = (
        LagSample(f"g{i % 50}", "t", i % 7, (T0 + i) * 1000, i, i + 10, 10, 1.0, Status.OK)
        for i in range(400_000)
    )
    samples = write_samples(tmp_path / "big.jsonl", rows)
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
