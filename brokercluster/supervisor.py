"""The cluster supervisor: starts N brokers, serves the control socket, stops them all.

One asyncio loop owns every broker's state. The control socket's requests and the exit
watchers run on it; a lock per broker serializes the operator's actions on that broker,
so that a `restart` has finished before a `kill` of the same broker begins. Nothing is
restarted automatically: the operator decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from typing import Any

from brokercluster.child import ActionError, BrokerChild
from brokercluster.control import (
    ACTIONS,
    MAX_LINE,
    BrokerState,
    NoSupervisor,
    addressable,
    supervisor_alive,
)
from brokercluster.layout import HOST, ClusterLayout, NodeLayout
from brokercluster.probe import observe, probe_security

log = logging.getLogger(__name__)


class Supervisor:
    def __init__(self, layout: ClusterLayout, overrides: dict[str, str],
                 start_timeout: float = 60.0, stop_timeout: float = 15.0,
                 add_scram: list[str] | None = None) -> None:
        self.layout = layout
        self.add_scram = add_scram or []  # every node's, for whichever leads first
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.children = {
            n.node_id: BrokerChild(n, self._args(n, overrides), self.say) for n in layout.nodes
        }
        self.stopping = False
        self.probe_security = probe_security(layout, overrides)

    def _args(self, node: NodeLayout, overrides: dict[str, str]) -> list[str]:
        args = [sys.executable, "-m", "brokercore",
                *(f"--add-scram={user}" for user in self.add_scram)]
        for key, value in self.layout.overrides(node.node_id, overrides).items():
            args += ["--override", f"{key}={value}"]
        return args

    @staticmethod
    def say(line: str) -> None:
        print(line, flush=True)

    async def run(self) -> int:
        """Serve until SIGINT or SIGTERM; the exit status of the supervisor."""
        path = self.layout.socket_path
        if supervisor_alive(path):
            raise NoSupervisor(f"a cluster supervisor is already running at {path.parent}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        with addressable(path) as address:
            server = await asyncio.start_unix_server(self._serve, address, limit=MAX_LINE)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            if not await self._start_all(stop):
                return 1
            await stop.wait()
            return 0
        finally:
            self.stopping = True
            server.close()
            await self._stop_all()
            path.unlink(missing_ok=True)
            self.say("millrace cluster stopped")

    async def _start_all(self, stop: asyncio.Event) -> bool:
        # All at once: with a controller quorum no broker is ready before a majority is up.
        starting = asyncio.gather(*(c.start(self.start_timeout) for c in self.children.values()))
        interrupted = asyncio.create_task(stop.wait())
        both: set[asyncio.Future[Any]] = {starting, interrupted}
        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
        interrupted.cancel()
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, ActionError):
                await starting
            return False
        try:
            starting.result()
        except ActionError as exc:
            self.say(f"millrace cluster failed to start: {exc}")
            return False
        for child in self.children.values():
            self.say(f"broker {child.node_id} ready on PLAINTEXT://{child.node.bootstrap} "
                     f"(pid {child.describe()['pid']}, log {child.node.output})")
        self.say(f"millrace cluster ready: {len(self.children)} brokers, "
                 f"bootstrap {self.layout.bootstrap}, control socket {self.layout.socket_path}")
        return True

    async def _stop_all(self) -> None:
        alive = [c for c in self.children.values() if c.alive]
        for child in alive:
            self.say(f"stopping broker {child.node_id} (SIGTERM)")
        await asyncio.gather(*(c.stop(self.stop_timeout) for c in alive),
                             return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # longer than MAX_LINE
                    writer.write(_encode(_error("request line too long")))
                    break
                if not line:
                    break
                try:
                    answer = await self.handle(line)
                except Exception as exc:  # a bug here must not take the supervisor down
                    log.exception("control request %r failed", line[:200])
                    answer = _error(f"internal error: {exc!r}")
                writer.write(_encode(answer))
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(self, line: bytes) -> dict[str, Any]:
        """Answer one control request; bad input gets an error answer, never an exception."""
        try:
            request = json.loads(line)
        except ValueError:
            return _error("the request is not JSON")
        if not isinstance(request, dict):
            return _error("the request is not a JSON object")
        action = request.get("action")
        if action == "status":
            return {"ok": True, **await self.status()}
        if action not in ACTIONS:
            return _error(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        node_id = request.get("id")
        child = self.children.get(node_id) if type(node_id) is int else None
        if child is None:
            return _error(f"unknown broker id {node_id!r}; this cluster has brokers "
                          f"1..{len(self.children)}")
        if self.stopping:
            return _error("the supervisor is shutting down")
        async with child.lock:
            try:
                message = await self._act(action, child)
            except ActionError as exc:
                return {**_error(str(exc)), "broker": child.describe()}
        self.say(message)
        return {"ok": True, "message": message, "broker": child.describe()}

    async def _act(self, action: str, child: BrokerChild) -> str:
        n = child.node_id
        match action:
            case "start":
                await child.start(self.start_timeout)
                return f"broker {n} started (pid {child.describe()['pid']})"
            case "restart":
                if child.alive:
                    await child.stop(self.stop_timeout)
                await child.start(self.start_timeout)
                return f"broker {n} restarted (pid {child.describe()['pid']})"
            case "stop":
                await child.stop(self.stop_timeout)
                return f"broker {n} stopped"
            case "kill":
                await child.kill()
                return f"broker {n} killed (SIGKILL)"
            case "pause":
                await child.pause()
                return f"broker {n} paused (SIGSTOP)"
            case _:
                child.resume()
                return f"broker {n} resumed (SIGCONT)"

    async def status(self) -> dict[str, Any]:
        up = [c for c in self.children.values() if c.state is BrokerState.RUNNING]
        views = await asyncio.gather(*(
            observe(c.node_id, HOST, c.node.kafka_port, c.node.metrics_port,
                    security=self.probe_security) for c in up))
        seen = {v.node_id: v for v in views if v is not None}
        brokers = []
        for child in self.children.values():
            entry = child.describe()
            view = seen.get(child.node_id)
            entry.update(
                state_text=child.status_text(),
                active_controller=view.active_controller if view else None,
                sees=view.brokers if view else None,
                leaders=view.leaders if view else None,
                cluster_id=view.cluster_id if view else None,
            )
            brokers.append(entry)
        active = [v.node_id for v in seen.values() if v.active_controller]
        return {
            "data_dir": str(self.layout.data_dir), "bootstrap": self.layout.bootstrap,
            # More than one only for the moment a deposed leader has not yet noticed.
            "active_controller": active[0] if len(active) == 1 else None,
            "brokers": brokers,
        }


def _error(message: str) -> dict[str, Any]:
    return {"ok": False, "error": message}


def _encode(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer).encode() + b"\n"
