"""Real proxy servers for tests: the platform's web server (one worker each) as
subprocesses sharing one database.

Each process is told its port is the proxy's, so the v2/v3 API is at the root as Confluent
clients expect, and knows its own internal URL so consumer instances can be forwarded.
The last URL is a registry process (the proxies' SCHEMA_REGISTRY_URL).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

from brokercluster.ports import free_port
from tests.brokerproc import REPO


@contextmanager
def proxy_servers(bootstrap: str, data_dir: Path, processes: int = 2) -> Iterator[list[str]]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "millrace.settings",
        "DATABASE_URL": f"sqlite:///{data_dir / 'proxy.sqlite3'}",
        "MILLRACE_DATA_DIR": str(data_dir),
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "MILLRACE_LOG_LEVEL": "WARNING",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                   cwd=REPO, env=env, check=True)
    registry_port = free_port()
    registry_url = f"http://127.0.0.1:{registry_port}"
    ports = [free_port() for _ in range(processes)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    registry = _server(registry_port, {**env, "MILLRACE_REGISTRY_PORT": str(registry_port)},
                       data_dir / "registry.log")
    servers = [
        _server(port, {**env, "MILLRACE_RESTPROXY_PORT": str(port),
                       "RESTPROXY_INTERNAL_URL": url, "SCHEMA_REGISTRY_URL": registry_url},
                data_dir / f"proxy-{port}.log")
        for port, url in zip(ports, urls, strict=True)
    ]
    try:
        for url, server in zip([*urls, registry_url], [*servers, registry], strict=True):
            wait_ready(url, server)
        yield [*urls, registry_url]
    finally:
        for server in [*servers, registry]:
            server.terminate()
        for server in [*servers, registry]:
            with suppress(subprocess.TimeoutExpired):
                server.wait(timeout=10)


def _server(port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "millrace.webserver", "--bind", f"127.0.0.1:{port}",
             "--workers", "1"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=output,
        )


def wait_ready(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"proxy server at {url} exited with {server.returncode}")
        with suppress(httpx.HTTPError):
            if httpx.get(url + "/", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"proxy server at {url} did not start")
