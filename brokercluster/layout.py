"""Where each node of a local cluster listens and keeps its data (CLUSTER.md, "Processes").

Node i of a cluster with base port P serves Kafka on P+i-1, the controller quorum on
P+100+i-1 and metrics on P+200+i-1, and keeps its log under D/broker-i.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from brokercluster.ports import CONTROLLER_OFFSET, LOOPBACK, METRICS_OFFSET

HOST = LOOPBACK
MAX_BROKERS = CONTROLLER_OFFSET - 1
SOCKET_NAME = "cluster.sock"


class LayoutError(ValueError):
    """The requested cluster cannot be laid out (too many brokers, ports out of range)."""


@dataclass(frozen=True)
class NodeLayout:
    node_id: int
    kafka_port: int
    controller_port: int
    metrics_port: int
    log_dir: Path
    output: Path

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.kafka_port}"


@dataclass(frozen=True)
class ClusterLayout:
    brokers: int
    base_port: int
    data_dir: Path
    # The name of the Kafka listener on each node's Kafka port: PLAINTEXT, or a name the
    # operator's listener.security.protocol.map secures (README, "A secured cluster").
    kafka_listener: str = "PLAINTEXT"

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= MAX_BROKERS:
            raise LayoutError(f"--brokers must be 1..{MAX_BROKERS}, got {self.brokers}")
        if not 1024 <= self.base_port <= 65535 - METRICS_OFFSET - self.brokers:
            raise LayoutError(f"--base-port {self.base_port} leaves the ports of "
                              f"{self.brokers} brokers outside 1024..65535")

    @property
    def nodes(self) -> list[NodeLayout]:
        return [self.node(i) for i in range(1, self.brokers + 1)]

    def node(self, node_id: int) -> NodeLayout:
        p = self.base_port + node_id - 1
        return NodeLayout(
            node_id, p, p + CONTROLLER_OFFSET, p + METRICS_OFFSET,
            self.data_dir / f"broker-{node_id}", self.data_dir / "logs" / f"broker-{node_id}.log",
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self.nodes)

    @property
    def socket_path(self) -> Path:
        return self.data_dir / SOCKET_NAME

    def overrides(self, node_id: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The broker config of one node; `extra` (the operator's --override) wins."""
        n = self.node(node_id)
        return {
            "node.id": str(node_id),
            # The Kafka listener first: brokers that predate the quorum serve listeners[0].
            "listeners": f"{self.kafka_listener}://{HOST}:{n.kafka_port},"
                         f"CONTROLLER://{HOST}:{n.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": self.voters,
            "log.dirs": str(n.log_dir),
            "metrics.http.listener": f"{HOST}:{n.metrics_port}",
            **(extra or {}),
        }
