"""The one command line for every job, for spark-submit and for a Celery task's subprocess.

    python -m laganalysis.run JOB --params '{"samples_path": "..."}' --out result.json \
        [--master local[*]|spark://host:7077]

stdout carries JSON lines: ``{"event": "progress", "stages_done", "stages_total",
"stages_skipped", "tasks_done", "tasks_total"}`` about twice a second while they change (the
last with the final counts), then ``{"event": "done", "out": ...}``,
``{"event": "cancelled"}`` (exit 130) or ``{"event": "error", "error": ..., "message": ...}``
(exit 1; 2 for bad parameters). The job's Spark jobs carry a tag and a job group named by
``--tag``; SIGTERM or SIGINT interrupts them. The result file is written to a temporary name
and renamed, so it exists complete or not at all.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from laganalysis.jobs import CHECKS, JOBS, ParamError

EXIT_FAILED, EXIT_BAD_PARAMS, EXIT_CANCELLED = 1, 2, 130


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        params = json.loads(args.params)
        if not isinstance(params, dict):
            raise ParamError("--params must be a JSON object")
        CHECKS[args.job](params)  # before the JVM: bad parameters cost no Spark start
    except (json.JSONDecodeError, ParamError) as exc:
        return _fail("ParamError", str(exc), EXIT_BAD_PARAMS)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from laganalysis.session import configure

    spark = configure(SparkSession.builder, args.master, f"millrace-{args.job}").getOrCreate()
    cancelled = threading.Event()
    try:
        return execute(spark, args.job, params, Path(args.out), args.tag, cancelled,
                       on_signal=True)
    finally:
        spark.stop()


def execute(spark: Any, job: str, params: dict[str, Any], out: Path, tag: str,
            cancelled: threading.Event, on_signal: bool = False) -> int:
    """Run `job` in `spark` under `tag`, printing the JSON lines; returns the exit code.
    Setting `cancelled` (SIGTERM/SIGINT do, with `on_signal`) interrupts its Spark jobs.
    The session stays open: the command line stops it, a test shares it."""
    from laganalysis.jobs.history import register_once

    register_once(spark)
    stop_progress = threading.Event()
    _cancel_when_asked(spark, tag, cancelled, stop_progress)
    if on_signal:
        _cancel_on_signal(cancelled)
    spark.addTag(tag)
    spark.sparkContext.setJobGroup(tag, f"millrace {job}", interruptOnCancel=True)
    reporter = threading.Thread(target=_report, args=(spark, tag, stop_progress), daemon=True)
    reporter.start()
    try:
        try:
            result = JOBS[job](spark, params)
        finally:
            stop_progress.set()
            reporter.join(timeout=5)  # its last counts come before the ending, whatever it is
        if cancelled.is_set():
            return _emit({"event": "cancelled"}, EXIT_CANCELLED)
        _write_atomically(out, {**result.to_json(), "params": params})
        return _emit({"event": "done", "out": str(out)}, 0)
    except ParamError as exc:
        return _fail("ParamError", str(exc), EXIT_BAD_PARAMS)
    except Exception as exc:  # noqa: BLE001 - any job failure is reported, in Spark's words
        if cancelled.is_set():
            return _emit({"event": "cancelled"}, EXIT_CANCELLED)
        return _fail(type(exc).__name__, readable_error(exc), EXIT_FAILED)
    finally:
        stop_progress.set()
        spark.removeTag(tag)
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def _cancel_on_signal(cancelled: threading.Event) -> None:
    """SIGTERM or SIGINT interrupts the run's Spark jobs; the run then ends CANCELLED."""

    def interrupt(signum: int, frame: Any) -> None:
        # The main thread is inside a py4j call; another thread talks to the JVM.
        cancelled.set()

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def _cancel_when_asked(
    spark: Any, tag: str, cancelled: threading.Event, finished: threading.Event
) -> None:
    """Another thread than the one inside a py4j call interrupts the run's Spark jobs."""

    def cancel_when_asked() -> None:
        while not finished.wait(0.2):
            if cancelled.is_set():
                spark.sparkContext.cancelJobGroup(tag)
                spark.interruptTag(tag)
                return

    threading.Thread(target=cancel_when_asked, daemon=True).start()


def readable_error(exc: BaseException) -> str:
    """Spark's own error without the JVM stack: its class and message, first lines only."""
    text = getattr(exc, "getMessage", lambda: None)() or str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("at ")]
    return "\n".join(lines[:12])


def _report(spark: Any, tag: str, stop: threading.Event) -> None:
    """Emits the run's progress when it changes, and its final counts once stopped."""
    tracker = spark.sparkContext.statusTracker()
    last = None
    while True:
        stopping = stop.wait(0.5)
        now = _progress(tracker, tag)
        if now != last:
            last = now
            _emit({"event": "progress", **now}, 0)
        if stopping:
            return


def _progress(tracker: Any, tag: str) -> dict[str, int]:
    """Stages and tasks of the run's Spark jobs. A stage of a job that has succeeded
    without running it is skipped (Spark reused its shuffle output): it counts apart, so
    a finished run reads "4 of 4 stages, 5 skipped", not "4 of 9"."""
    counts = dict.fromkeys(("stages_done", "stages_total", "stages_skipped",
                            "tasks_done", "tasks_total"), 0)
    for job_id in tracker.getJobIdsForGroup(tag):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else []:
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue  # forgotten
            complete = stage.numCompletedTasks >= stage.numTasks
            if not complete and str(job.status) == "SUCCEEDED":
                counts["stages_skipped"] += 1
                continue
            counts["stages_total"] += 1
            counts["stages_done"] += complete
            counts["tasks_total"] += stage.numTasks
            counts["tasks_done"] += stage.numCompletedTasks
    return counts


def _write_atomically(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(payload, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _emit(event: dict[str, Any], code: int) -> int:
    print(json.dumps(event), flush=True)
    return code


def _fail(error: str, message: str, code: int) -> int:
    return _emit({"event": "error", "error": error, "message": message}, code)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m laganalysis.run", description=__doc__)
    parser.add_argument("job", choices=sorted(JOBS))
    parser.add_argument("--params", default="{}", help="the job's parameters as a JSON object")
    parser.add_argument("--out", required=True, help="where to write the result JSON")
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER_URL", "local[*]"))
    parser.add_argument("--tag", default=f"millrace-{uuid.uuid4().hex[:12]}")
    return parser


if __name__ == "__main__":
    sys.exit(main())
