"""Real registry servers for tests: the platform's web server (one worker each) as
subprocesses over a database of their own.

Each process listens on its own port and is told that port is the registry's, so the API
is at the root as Confluent clients expect; all share one data directory (database file
or URL, and the shared cache) like processes of one deployment.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

from brokercluster.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "/schema-registry"  # the default MILLRACE_REGISTRY_PREFIX


@contextmanager
def registry_servers(
    database_url: str, data_dir: Path, processes: int = 1, at_root: bool = True,
    extra_env: dict[str, str] | None = None, tls: tuple[Path, Path] | None = None,
) -> Iterator[list[str]]:
    """Server URLs; the API is at their root, or under the prefix if not `at_root`. `tls`:
    (a PEM holding the server's key and certificate, its CA): HTTPS only, as
    `platform --secure` serves the registry."""
    env = {**os.environ, "DATABASE_URL": database_url, "MILLRACE_DATA_DIR": str(data_dir),
           **(extra_env or {})}
    env.setdefault("DJANGO_SETTINGS_MODULE", "millrace.settings")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT, env=env, check=True,
    )  # fmt: skip
    ports = [free_port() for _ in range(processes)]
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "millrace.webserver",
             # the server needs a plain port too (the control center's), unused here
             *(["--tls-bind", f"127.0.0.1:{port}", "--tls-cert", str(tls[0]),
                "--bind", f"127.0.0.1:{free_port()}"] if tls
               else ["--bind", f"127.0.0.1:{port}"]),
             "--workers", "1"],
            cwd=ROOT,
            env={**env, "MILLRACE_REGISTRY_PORT": str(port if at_root else 0)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    urls = [f"{'https' if tls else 'http'}://127.0.0.1:{port}" for port in ports]
    verify = ssl.create_default_context(cafile=str(tls[1])) if tls else True
    try:
        for url, server in zip(urls, servers, strict=True):
            _wait_ready(url if at_root else url + PREFIX, server, verify)
        yield urls
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            with suppress(subprocess.TimeoutExpired):
                server.wait(timeout=10)


def _wait_ready(url: str, server: subprocess.Popen[bytes],
                verify: ssl.SSLContext | bool = True) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"registry server at {url} exited with {server.returncode}")
        with suppress(httpx.HTTPError):
            # 401: auth on
            if httpx.get(url + "/", timeout=2, verify=verify).status_code in (200, 401):
                return
        time.sleep(0.2)
    raise RuntimeError(f"registry server at {url} did not start")
