"""`manage.py failover_demo | head -2`, and `| tee` ended by Ctrl-C: the demo's stdout is a
real pipe whose reader goes away. Like a Unix tool it stops, still checks what was
acknowledged, says so on stderr, and exits 0 (1 stays reserved for lost or duplicated
messages)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokerproc import REPO
from tests.compat.clients import new_topic

SUMMARY = re.compile(r"acknowledged (\d+), read back \1, lost 0, duplicated 0")


def start_demo(tmp_path: Path, bootstrap: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MILLRACE_DATA_DIR": str(tmp_path / "var")}
    return subprocess.Popen(
        [sys.executable, "manage.py", "failover_demo", "--bootstrap", bootstrap,
         "--topic", new_topic("failover-demo"), "--duration", "60"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("interrupt", [False, True], ids=["head", "tee-then-ctrl-c"])
def test_the_demo_on_a_closed_pipe_still_checks_and_keeps_its_exit_code(
        tmp_path: Path, kafka_bootstrap: str, interrupt: bool) -> None:
    demo = start_demo(tmp_path, kafka_bootstrap)
    assert demo.stdout is not None and demo.stderr is not None
    try:
        lines = [demo.stdout.readline() for _ in range(3)]  # `| head -3`
        assert lines[-1].startswith(b"Producing"), lines
        if interrupt:  # the terminal's Ctrl-C reaches tee and the demo together
            assert b"acked" in demo.stdout.readline()
            demo.stdout.close()
            demo.send_signal(signal.SIGINT)
        else:
            demo.stdout.close()  # `head -2` has what it wanted and exits
        code = demo.wait(90)
        errors = demo.stderr.read().decode()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert "BrokenPipeError" not in errors and "Traceback" not in errors, errors
    assert SUMMARY.search(errors), errors
    assert "OK: no acknowledged message lost or duplicated" in errors, errors
    assert code == 0, errors
