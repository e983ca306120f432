"""Child processes of the platform command: start, wait until ready, stop (SIGTERM to several
at once, then wait for each).

Every child gets PR_SET_PDEATHSIG, so that even a `kill -9` of the platform command leaves
nothing orphaned; a clean stop sends SIGTERM and waits, then SIGKILL.
"""

from __future__ import annotations

import base64
import ctypes
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def http_ok(url: str, basic: tuple[str, str] | None = None, ca: str | None = None) -> bool:
    """Whether `url` answers with a success (urlopen raises for 4xx and 5xx), sending
    `basic` (user, password) as HTTP Basic credentials when given, and trusting the CA
    file `ca` for an https URL."""
    request = urllib.request.Request(url)
    if basic is not None:
        token = base64.b64encode(f"{basic[0]}:{basic[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=ca) if ca else None
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(response.status < 500)
    except OSError:  # HTTPError (4xx, 5xx) included
        return False


@dataclass
class Child:
    name: str
    args: list[str]
    log_path: Path
    ready: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)
    stop_timeout: float = 15.0
    proc: subprocess.Popen[bytes] | None = None
    offset: int = 0  # where this run's output begins in log_path
    stopping: float = 0.0  # when terminate() sent SIGTERM (time.monotonic())

    def start(self, cwd: Path) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.offset = out.tell()
            self.proc = subprocess.Popen(
                self.args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, **self.env}, preexec_fn=_die_with_parent,
            )

    def check_running(self) -> None:
        """Raise if the child has exited (while it should be getting ready)."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited early; see {self.log_path}:\n{self.tail()}")

    def output(self) -> str:
        """Everything this run has written so far (earlier runs share the file)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        self.terminate()
        self.wait_stopped()

    def terminate(self) -> None:
        """SIGTERM, without waiting: children stopped together end in parallel."""
        self.stopping = time.monotonic()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def wait_stopped(self) -> None:
        """Wait for the exit `terminate` asked for: SIGKILL once `stop_timeout` seconds have
        passed since then."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.wait(max(0.0, self.stopping + self.stop_timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
