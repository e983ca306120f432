"""One broker: configuration, controller, replica manager, coordinator and listener."""

from __future__ import annotations

import logging
from typing import Any

import brokercore.handlers  # noqa: F401  (registers every API handler)
from brokercore.clock import Clock, SystemClock
from brokercore.config import BrokerConfig, Listener, parse_listeners
from brokercore.controller.controller import Controller
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.server import KafkaServer

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.node_id = config.node_id
        self.log_dir = config.log_dirs[0]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.controller = Controller(config, self.log_dir / "__cluster_metadata-0")
        self.replica_manager = ReplicaManager(
            config, self.controller.image, self.log_dir, self.clock
        )
        self.controller.listeners.append(self.replica_manager.on_metadata)
        # The group coordinator attaches itself here (brokercore.coordinator).
        self.group_coordinator: Any = None
        listener = config.listeners[0]
        self.server = KafkaServer(self, listener.host, listener.port)
        self.advertised: Listener = listener

    @property
    def image(self) -> Any:
        return self.controller.image

    @property
    def cluster_id(self) -> str | None:
        return self.controller.image.cluster_id

    async def start(self) -> None:
        self.replica_manager.load()
        port = await self.server.start()
        self.advertised = self._advertised_listener(port)
        await self.controller.register_broker(
            self.node_id, self.advertised.host, self.advertised.port
        )
        self.replica_manager.start()
        from brokercore.coordinator import attach_group_coordinator

        await attach_group_coordinator(self)
        log.info("node %d: serving Kafka on %s:%d", self.node_id, self.server.host or "*", port)

    def _advertised_listener(self, bound_port: int) -> Listener:
        raw = self.config.get("advertised.listeners")
        bound = self.config.listeners[0]
        if raw:
            advertised = parse_listeners(raw)[0]
            port = bound_port if advertised.port == 0 else advertised.port
            return Listener(advertised.name, advertised.host, port)
        host = bound.host if bound.host not in ("", "0.0.0.0", "::") else "localhost"
        return Listener(bound.name, host, bound_port)

    async def stop(self) -> None:
        await self.server.stop()
        if self.group_coordinator is not None:
            await self.group_coordinator.stop()
        await self.replica_manager.stop()
        self.controller.close()
        log.info("node %d: stopped", self.node_id)
