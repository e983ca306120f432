"""A typed client for a running supervisor's control socket (what the control center uses).

    client = SupervisorClient(Path("var/cluster"))
    status = client.status()            # ClusterStatus: every broker's process state
    client.kill(2)                      # BrokerProcess of broker 2, now KILLED
    client.start(2)                     # returns once broker 2 says it is ready

It speaks the same JSON lines as `python -m brokercluster ACTION --json`, and imports
nothing from brokercore or any web framework. Blocking: call it from a thread (or
`asyncio.to_thread`) in async code; `start` and `restart` wait until the broker is ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokercluster.control import BrokerState, NoSupervisor, request
from brokercluster.layout import SOCKET_NAME

__all__ = ["ActionRefused", "BrokerProcess", "BrokerState", "ClusterStatus", "NoSupervisor",
           "SupervisorClient"]


class ActionRefused(Exception):
    """The supervisor refused an action (unknown broker, wrong state, failed start)."""

    def __init__(self, message: str, broker: BrokerProcess | None = None) -> None:
        super().__init__(message)
        self.broker = broker


@dataclass(frozen=True)
class BrokerProcess:
    """One broker process as its supervisor sees it; what Kafka's API cannot show."""

    node_id: int
    state: BrokerState
    state_text: str  # "running", "killed", "exited with code 1", "exited on SIGSEGV", ...
    pid: int | None
    exit_code: int | None
    kafka_port: int
    controller_port: int
    metrics_port: int
    log: str  # the broker's output file
    # From probing a running broker (None when it is not running or did not answer):
    active_controller: bool | None = None
    sees: tuple[int, ...] | None = None  # broker ids in its Metadata
    leaders: int | None = None  # partitions it leads
    cluster_id: str | None = None

    @property
    def alive(self) -> bool:
        return self.state in (BrokerState.STARTING, BrokerState.RUNNING, BrokerState.PAUSED,
                              BrokerState.STOPPING)

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> BrokerProcess:
        sees = entry.get("sees")
        return cls(
            node_id=int(entry["id"]), state=BrokerState(entry["state"]),
            state_text=str(entry.get("state_text") or entry["state"]), pid=entry.get("pid"),
            exit_code=entry.get("exit_code"), kafka_port=int(entry["kafka_port"]),
            controller_port=int(entry["controller_port"]),
            metrics_port=int(entry["metrics_port"]), log=str(entry.get("log", "")),
            active_controller=entry.get("active_controller"),
            sees=None if sees is None else tuple(sees), leaders=entry.get("leaders"),
            cluster_id=entry.get("cluster_id"),
        )


@dataclass(frozen=True)
class ClusterStatus:
    data_dir: str
    bootstrap: str
    active_controller: int | None  # None while no single broker reports it
    brokers: tuple[BrokerProcess, ...]

    def broker(self, node_id: int) -> BrokerProcess:
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        raise KeyError(node_id)


class SupervisorClient:
    """The supervisor serving the control socket of one data directory."""

    def __init__(self, data_dir: Path | str, timeout: float = 180.0) -> None:
        self.data_dir = Path(data_dir)
        self.timeout = timeout

    @property
    def socket_path(self) -> Path:
        return self.data_dir / SOCKET_NAME

    def available(self) -> bool:
        """Whether a supervisor answers at this data directory now."""
        try:
            self.status(timeout=5.0)
        except (NoSupervisor, OSError, ValueError):
            return False
        return True

    def status(self, timeout: float | None = None) -> ClusterStatus:
        """Raises NoSupervisor when none runs there, OSError when it does not answer."""
        answer = self._request({"action": "status"}, timeout)
        if not answer.get("ok"):
            raise ActionRefused(str(answer.get("error")))
        return ClusterStatus(
            data_dir=str(answer["data_dir"]), bootstrap=str(answer["bootstrap"]),
            active_controller=answer.get("active_controller"),
            brokers=tuple(BrokerProcess.from_json(b) for b in answer["brokers"]),
        )

    def stop(self, node_id: int) -> BrokerProcess:
        """SIGTERM (controlled shutdown), SIGKILL after the supervisor's stop timeout."""
        return self._act("stop", node_id)

    def kill(self, node_id: int) -> BrokerProcess:
        """SIGKILL; the broker stays down until `start`."""
        return self._act("kill", node_id)

    def pause(self, node_id: int) -> BrokerProcess:
        """SIGSTOP: frozen with its sockets open."""
        return self._act("pause", node_id)

    def resume(self, node_id: int) -> BrokerProcess:
        return self._act("resume", node_id)

    def start(self, node_id: int) -> BrokerProcess:
        """Start a stopped, killed or exited broker; returns once it is ready."""
        return self._act("start", node_id)

    def restart(self, node_id: int) -> BrokerProcess:
        return self._act("restart", node_id)

    def _act(self, action: str, node_id: int) -> BrokerProcess:
        answer = self._request({"action": action, "id": node_id}, None)
        broker = answer.get("broker")
        process = BrokerProcess.from_json(broker) if isinstance(broker, dict) else None
        if not answer.get("ok") or process is None:
            raise ActionRefused(str(answer.get("error")), process)
        return process

    def _request(self, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        return request(self.socket_path, message, self.timeout if timeout is None else timeout)
