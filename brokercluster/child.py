"""One broker process under the supervisor: started, signalled, watched until it exits.

Its state changes only here, on the supervisor's event loop: by the operator's actions
and by the watcher task that sees the process exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Callable
from typing import Any, BinaryIO

from brokercluster.control import ALIVE, BrokerState
from brokercluster.layout import NodeLayout

PR_SET_PDEATHSIG = 1
# Loaded before any fork: dlopen in a forked child of a threaded parent can deadlock.
_LIBC = ctypes.CDLL(None, use_errno=True)


class ActionError(Exception):
    """An operator's request that cannot be carried out; the message says why."""


def die_with(parent: int) -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when the supervisor dies, however it dies.

    SIGKILL rather than SIGTERM because a paused (SIGSTOPped) broker never acts on SIGTERM
    and would outlive us; a broker must survive a kill -9 anyway.
    """

    def preexec() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the supervisor died before prctl took effect
            os._exit(1)

    return preexec


class BrokerChild:
    def __init__(self, node: NodeLayout, args: list[str], say: Callable[[str], None]) -> None:
        self.node = node
        self.args = args
        self.say = say
        self.state = BrokerState.STOPPED
        self.ready = False
        self.proc: asyncio.subprocess.Process | None = None
        self.exit_code: int | None = None
        self.lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._ending: BrokerState | None = None  # where an exit we asked for leads

    @property
    def node_id(self) -> int:
        return self.node.node_id

    @property
    def alive(self) -> bool:
        return self.state in ALIVE

    def describe(self) -> dict[str, Any]:
        n = self.node
        return {
            "id": n.node_id, "pid": self.proc.pid if self.proc and self.alive else None,
            "state": self.state.value, "exit_code": self.exit_code,
            "kafka_port": n.kafka_port, "controller_port": n.controller_port,
            "metrics_port": n.metrics_port, "log": str(n.output), "log_dir": str(n.log_dir),
        }

    async def start(self, within: float) -> None:
        """Start the broker and return once it says it is ready (within `within` seconds)."""
        if self.alive:
            raise ActionError(f"broker {self.node_id} is already {self.state} "
                              f"(pid {self.proc.pid if self.proc else '?'})")
        self.node.log_dir.mkdir(parents=True, exist_ok=True)
        self.node.output.parent.mkdir(parents=True, exist_ok=True)
        offset = self.node.output.stat().st_size if self.node.output.exists() else 0
        out = self._open_output()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=die_with(os.getpid()),
            )
        finally:
            out.close()
        self.state, self.ready, self.exit_code, self._ending = (
            BrokerState.STARTING, False, None, None)
        self._watcher = asyncio.create_task(self._watch(self.proc))
        await self._wait_ready(offset, within)

    async def _wait_ready(self, offset: int, within: float) -> None:
        marker = f"millrace broker {self.node_id} ready on".encode()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        seen = b""
        while not self.ready:
            if not self.alive:
                raise ActionError(f"broker {self.node_id} {self.status_text()} before it was "
                                  f"ready; the end of {self.node.output}:\n{self.tail()}")
            if loop.time() > deadline:
                raise ActionError(f"broker {self.node_id} not ready after {within:.0f}s; "
                                  f"see {self.node.output}")
            chunk = self._read_output(offset)
            offset += len(chunk)
            seen = seen[-len(marker):] + chunk
            if marker in seen:
                self.ready = True
                if self.state is BrokerState.STARTING:
                    self.state = BrokerState.RUNNING
                return
            await asyncio.sleep(0.1)

    def _open_output(self) -> BinaryIO:
        return open(self.node.output, "ab")

    def _read_output(self, offset: int) -> bytes:
        with open(self.node.output, "rb") as f:
            f.seek(offset)
            return f.read()

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        if proc is not self.proc:
            return
        self.exit_code = code
        self.state = self._ending or BrokerState.EXITED
        if self.state is BrokerState.EXITED:
            self.say(f"broker {self.node_id} {self.status_text()}; see {self.node.output}")

    def status_text(self) -> str:
        if self.state is not BrokerState.EXITED or self.exit_code is None:
            return str(self.state)
        if self.exit_code < 0:
            return f"exited on {signal.Signals(-self.exit_code).name}"
        return f"exited with code {self.exit_code}"

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.node.output.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _require(self, action: str, *states: BrokerState) -> None:
        if self.state not in states:
            raise ActionError(f"cannot {action} broker {self.node_id}: it is {self.status_text()}")

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    async def _exited(self, within: float | None) -> bool:
        if self._watcher is None:
            return True
        try:
            await asyncio.wait_for(asyncio.shield(self._watcher), within)
        except TimeoutError:
            return False
        return True

    async def stop(self, within: float) -> None:
        """SIGTERM, the broker's clean shutdown; SIGKILL if it takes longer than `within`."""
        self._require("stop", *ALIVE)
        was_paused = self.state is BrokerState.PAUSED
        self._ending, self.state = BrokerState.STOPPED, BrokerState.STOPPING
        self._signal(signal.SIGTERM)
        if was_paused:  # a stopped process acts on SIGTERM only once continued
            self._signal(signal.SIGCONT)
        if not await self._exited(within):
            self.say(f"broker {self.node_id} did not stop within {within:.0f}s; SIGKILL")
            self._signal(signal.SIGKILL)
            await self._exited(None)

    async def kill(self) -> None:
        self._require("kill", *ALIVE)
        self._ending = BrokerState.KILLED
        self._signal(signal.SIGKILL)
        await self._exited(None)

    async def pause(self, within: float = 5.0) -> None:
        """SIGSTOP, answered once the kernel shows the process stopped: a signal is delivered
        asynchronously, and on a busy machine the broker can run on for a moment."""
        self._require("pause", BrokerState.STARTING, BrokerState.RUNNING)
        self._signal(signal.SIGSTOP)
        self.state = BrokerState.PAUSED
        deadline = asyncio.get_running_loop().time() + within
        while self.proc is not None and not _stopped(self.proc.pid):
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.005)

    def resume(self) -> None:
        self._require("resume", BrokerState.PAUSED)
        self._signal(signal.SIGCONT)
        self.state = BrokerState.RUNNING if self.ready else BrokerState.STARTING


def _stopped(pid: int) -> bool:
    """Whether /proc shows the process stopped (state T), or gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return fields[0] in ("T", "t", "Z", "X")
