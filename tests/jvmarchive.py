"""A class-data-sharing archive of the classes a Spark JVM loads, for the tests' JVMs.

A test JVM (a local session, a job Celery launches, a standalone master or worker) lives
for seconds and spends half its CPU loading and verifying the same Spark classes every
time. A dynamic CDS archive (JDK 13+: `-XX:ArchiveClassesAtExit`, then
`-XX:SharedArchiveFile`) maps them ready-made instead: a session start and a small query
took 11-11.7 s of JVM CPU without it and 5.5 s with it (47 s and 26 s wall, load 15-20).

    .venv/bin/python -m tests.jvmarchive      # `make test` runs it; a no-op when it exists

writes `var/jvm-archive/spark-<key>.jsa` by running one small lag_summary job through
`python -m laganalysis.run` (the jobs' own entry point) with `ArchiveClassesAtExit`; the key
names the Java launcher, pyspark's version and path and the JVM options, so a new JDK, venv
or option makes a new archive. `conftest.py` adds `-XX:SharedArchiveFile` to
`JDK_JAVA_OPTIONS` when the archive exists. A JVM whose class path does not start with the
archive's (a standalone worker's executors) or a changed JDK only loses the speed: the JVM
says so in a warning and loads its classes as before, nothing else changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The options every test JVM runs with (conftest.py says why); here, not in conftest.py, so
# that making the archive imports no test plugin (conftest.py makes a profiled run's pytest
# a subreaper, and the job's JVM would then wait, a zombie, for this process to reap it).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
ARCHIVE_DIR = REPO / "var" / "jvm-archive"
CREATE_TIMEOUT_S = 600


def archive_path(jvm_options: str) -> Path:
    """Where the archive for this JDK, this pyspark and these options lives."""
    spec = importlib.util.find_spec("pyspark")  # not imported: conftest calls this
    java = os.path.realpath(shutil.which("java") or "java")
    key = json.dumps([java, importlib.metadata.version("pyspark"), spec and spec.origin,
                      jvm_options])
    return ARCHIVE_DIR / f"spark-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def create(jvm_options: str) -> Path:
    """The archive, made now if missing (written under a temporary name, then renamed)."""
    path = archive_path(jvm_options)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    log = path.with_suffix(".log")  # the job's stderr: Spark's log, the JVM's warnings
    with tempfile.TemporaryDirectory() as scratch, log.open("wb") as stderr:
        samples = Path(scratch) / "samples"
        samples.mkdir()
        (samples / "part-0.jsonl").write_text("".join(
            json.dumps({"v": 1, "group": "g", "topic": "t", "partition": i % 3,
                        "ts": 1_700_000_000_000 + i * 1000, "committed_offset": i,
                        "end_offset": i + 10, "lag": 10, "lag_seconds": 1.0,
                        "status": "OK"}) + "\n" for i in range(100)))  # fmt: skip
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "JDK_JAVA_OPTIONS":
               f"{jvm_options} -XX:ArchiveClassesAtExit={partial}"}  # fmt: skip
        job = subprocess.Popen(
            [sys.executable, "-m", "laganalysis.run", "lag_summary", "--params",
             json.dumps({"samples_path": str(samples)}), "--out", f"{scratch}/result.json",
             "--master", "local[2]"], cwd=REPO, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip
        code = job.wait(CREATE_TIMEOUT_S)
        _wait_for_group(job.pid)  # the JVM writes the archive as it exits, after Python
    if code != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the archive job exited with {code}; no archive written ({log})")
    os.replace(partial, path)
    return path


def _wait_for_group(pgid: int) -> None:
    """Until every process of the job's group has exited. One this process adopted (as a
    subreaper, which importing conftest.py makes a profiled run's processes) is reaped here:
    a zombie still counts as a member of its group."""
    deadline = time.monotonic() + CREATE_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


if __name__ == "__main__":
    try:
        print(create(TEST_JVM_OPTIONS))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        # The tests run without it, only slower: no reason to stop `make test` here.
        print(f"no JVM class archive: {exc}", file=sys.stderr)
