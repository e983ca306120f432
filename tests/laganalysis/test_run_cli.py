"""python -m laganalysis.run as Celery and spark-submit use it: progress lines, an atomic
result file, readable failures, and cancellation leaving nothing behind.

A JVM start is seconds on this machine, so only what needs the command itself runs it as a
subprocess (`test_run_command.py`: bad parameters, refused before Spark starts; SIGTERM);
these tests run the same body (`execute`) on the session the laganalysis tests share."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from laganalysis.burrow import Status
from laganalysis.records import LagSample
from laganalysis.run import execute
from tests.laganalysis.history import T0, catching_up_group, write_samples


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def run_here(spark: Any, capsys: pytest.CaptureFixture[str], job: str,
             params: dict[str, Any], out: Path) -> tuple[int, list[dict[str, Any]]]:
    """The command's body on the tests' shared session: what it prints and its exit code."""
    code = execute(spark, job, params, out, f"test-{job}", threading.Event())
    return code, events(capsys.readouterr().out)


def test_a_run_reports_progress_and_writes_its_result(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    samples = write_samples(tmp_path / "s.jsonl", catching_up_group())
    out = tmp_path / "out" / "result.json"
    code, lines = run_here(spark, capsys, "eta", {"samples_path": samples}, out)
    assert code == 0, lines
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


def test_a_spark_failure_is_readable_and_exits_1(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "result.json"
    code, lines = run_here(spark, capsys, "lag_summary",
                           {"samples_path": str(tmp_path / "missing")}, out)
    assert code == 1
    error = lines[-1]
    assert error["event"] == "error" and "PATH_NOT_FOUND" in error["message"]
    assert "\tat org.apache" not in error["message"]
    assert not out.exists()


def test_a_cancel_interrupts_the_running_job_on_a_shared_session(
    spark: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What SIGTERM sets, set from another thread once tasks run; the session stays usable."""
    samples = write_samples(tmp_path / "big.jsonl", busy_rows(200_000))
    out, cancelled = tmp_path / "result.json", threading.Event()
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(execute(
        spark, "lag_summary", {"samples_path": samples}, out, "test-cancel", cancelled)))
    runner.start()
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 300
    while not any(tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup("test-cancel")):
        assert time.monotonic() < deadline and runner.is_alive()
        time.sleep(0.05)
    cancelled.set()
    runner.join(300)
    assert codes == [130]
    assert events(capsys.readouterr().out)[-1] == {"event": "cancelled"}
    assert not out.exists()
    assert spark.range(3).count() == 3


def busy_rows(n: int) -> Any:
    return (LagSample(f"g{i % 50}", "t", i % 7, (T0 + i) * 1000, i, i + 10, 10, 1.0, Status.OK)
            for i in range(n))
