"""Drive one `python -m laganalysis.run` subprocess: progress in, cancel out, outcome back.

The job runs in its own process group (its JVM with it), so the Celery worker never holds a
JVM or Spark's threads (dashboards_lag.md §5: forking after either is unsafe), and ending the
group ends everything the job started. The subprocess speaks JSON lines on stdout
(laganalysis/README.md): `progress` events, then `done`, `cancelled` or `error`; its stderr
(Spark's log) goes to a file next to the result, read back only to explain a crash.

No Django here: `controlcenter.analysis.execute` gives the callbacks that touch the database.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import enum
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25
# After SIGTERM the job interrupts its Spark jobs (tag and job group) and exits 130; a JVM
# that does not stop in this time gets SIGKILL with its whole group.
GRACE_SECONDS = 15.0
STDERR_TAIL_LINES = 12
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Progress:
    stages_done: int = 0
    stages_total: int = 0
    stages_skipped: int = 0  # never run: Spark reused their shuffle output
    tasks_done: int = 0
    tasks_total: int = 0


class Ending(enum.StrEnum):
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Outcome:
    ending: Ending
    result: dict[str, Any] | None = None  # the job's result file, when DONE
    error: str = ""  # readable: "<ExceptionClass>: <Spark's message>"


@dataclass(frozen=True)
class JobCommand:
    job: str
    params: Mapping[str, Any]
    out: Path  # the result file; its directory also receives spark.log
    master: str  # local[*] or spark://host:7077
    tag: str  # the Spark job tag and group, to find the job in Spark's UI

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "laganalysis.run", self.job,
                "--params", json.dumps(dict(self.params)), "--out", str(self.out),
                "--master", self.master, "--tag", self.tag]  # fmt: skip


def run_job(command: JobCommand, on_progress: Callable[[Progress], None],
            cancel_requested: Callable[[], bool], env: Mapping[str, str] | None = None
            ) -> Outcome:  # fmt: skip
    """Run the job to its end. Calls `on_progress` when the progress changes and asks
    `cancel_requested` every POLL_SECONDS; a True ends the job's process group."""
    command.out.parent.mkdir(parents=True, exist_ok=True)
    stderr_path = command.out.parent / "spark.log"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            command.argv(), stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
            start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip
    assert proc.stdout is not None
    lines: queue.Queue[dict[str, Any]] = queue.Queue()
    reader = threading.Thread(target=_read_events, args=(proc.stdout, lines), daemon=True)
    reader.start()
    last: dict[str, Any] | None = None
    cancelling_since: float | None = None
    while True:
        code = proc.poll()
        last = _drain(lines, on_progress, last)
        if code is not None:
            break
        if cancelling_since is None and cancel_requested():
            log.info("cancelling analysis job %s (process group %d)", command.tag, proc.pid)
            _signal_group(proc.pid, signal.SIGTERM)
            cancelling_since = time.monotonic()
        elif cancelling_since is not None and time.monotonic() - cancelling_since > GRACE_SECONDS:
            _signal_group(proc.pid, signal.SIGKILL)
        time.sleep(POLL_SECONDS)
    reader.join(timeout=5)
    last = _drain(lines, on_progress, last)
    _signal_group(proc.pid, signal.SIGKILL)  # nothing the job started outlives it
    return _outcome(code, last, command.out, stderr_path, cancelling_since is not None)


def _outcome(code: int, last: dict[str, Any] | None, out: Path, stderr_path: Path,
             cancelled: bool) -> Outcome:  # fmt: skip
    event = (last or {}).get("event")
    if cancelled or event == "cancelled":
        return Outcome(Ending.CANCELLED)
    if code == 0 and event == "done":
        with open(out, encoding="utf-8") as f:
            return Outcome(Ending.DONE, result=json.load(f))
    if event == "error" and last is not None:
        return Outcome(Ending.FAILED, error=f"{last.get('error')}: {last.get('message')}")
    return Outcome(Ending.FAILED, error=f"the job exited with code {code}: "
                                        f"{_stderr_tail(stderr_path)}")


def _drain(lines: queue.Queue[dict[str, Any]], on_progress: Callable[[Progress], None],
           last: dict[str, Any] | None) -> dict[str, Any] | None:  # fmt: skip
    """Hand on the newest progress of what arrived; return the newest final event."""
    progress: Progress | None = None
    while True:
        try:
            event = lines.get_nowait()
        except queue.Empty:
            break
        if event.get("event") == "progress":
            progress = Progress(**{f.name: int(event.get(f.name) or 0)
                                   for f in dataclasses.fields(Progress)})
        else:
            last = event
    if progress is not None:
        on_progress(progress)
    return last


def _read_events(stream: IO[bytes], into: queue.Queue[dict[str, Any]]) -> None:
    for raw in stream:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("{"):
            continue  # a library printing to stdout; the protocol is JSON objects
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            into.put(event)


def _stderr_tail(path: Path) -> str:
    """The lines of Spark's log that say what went wrong, without JVM stack frames."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "no output"
    lines = [ln for ln in text.splitlines()
             if ln.strip() and not ln.lstrip().startswith(("at ", "..."))]
    wanted = [ln for ln in lines if "Error" in ln or "Exception" in ln] or lines
    return "\n".join(wanted[-STDERR_TAIL_LINES:]) or "no output"


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _die_with_parent() -> None:
    """The job ends with the worker that launched it, even on a SIGKILL of the worker."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
