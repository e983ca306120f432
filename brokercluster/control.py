"""The control socket's wire format: one JSON object per line each way.

A request is `{"action": "status"}` or `{"action": "kill", "id": 2}`; the answer is
`{"ok": true, ...}` or `{"ok": false, "error": "..."}`. The supervisor serves it at
`D/cluster.sock`; the CLI, the tests and the control center are its clients.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any


class BrokerState(StrEnum):
    """A broker process's state as the supervisor sees it (the Kafka API cannot)."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    STOPPED = "stopped"
    KILLED = "killed"
    EXITED = "exited"


ALIVE = (BrokerState.STARTING, BrokerState.RUNNING, BrokerState.PAUSED, BrokerState.STOPPING)
ACTIONS = ("status", "stop", "kill", "pause", "resume", "start", "restart")
# sun_path holds 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107
MAX_LINE = 1 << 20


class NoSupervisor(Exception):
    """Nothing answers at the data directory's control socket."""


@contextlib.contextmanager
def addressable(path: Path) -> Iterator[str]:
    """A name for `path` that fits in a Unix socket address.

    Deep data directories (pytest's, for one) exceed sun_path; Linux then reaches the same
    file through the directory's descriptor under /proc/self/fd.
    """
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def request(path: Path, message: dict[str, Any], timeout: float = 180.0) -> dict[str, Any]:
    """Send one request to the supervisor at `path` and return its answer."""
    if not path.exists():
        raise NoSupervisor(f"no cluster supervisor running at {path.parent} (no {path.name})")
    with socket.socket(socket.AF_UNIX) as sock, addressable(path) as address:
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            raise NoSupervisor(
                f"no cluster supervisor running at {path.parent} ({path.name} is stale)"
            ) from exc
        sock.sendall(json.dumps(message).encode() + b"\n")
        answer = _read_line(sock)
    if not answer:
        raise NoSupervisor(f"the supervisor at {path.parent} closed the connection")
    result: dict[str, Any] = json.loads(answer)
    return result


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks)


def supervisor_alive(path: Path) -> bool:
    try:
        request(path, {"action": "status"}, timeout=5.0)
    except (NoSupervisor, OSError, ValueError):
        return False
    return True
