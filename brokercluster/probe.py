"""Ask one broker what it sees, as an operator would: Metadata and its metrics endpoint.

The supervisor uses this for `status`. A Metadata request (brokercore's own codec) says
which brokers a node knows and its cluster id. Which node is the active controller is not
in Metadata (in KRaft the controller id there is any broker's), so, as with Kafka's JMX,
it comes from the metrics: ActiveControllerCount is 1 on the active controller only, and
LeaderCount is how many partitions the broker leads.

On a secured Kafka listener the probe connects as the brokers connect to each other
(`probe_security`): the listener's TLS truststore, then a SASL login with
`sasl.mechanism.inter.broker.protocol` and the listener's JAAS username and password. That
principal is the brokers' own, a super user, so `status` sees every topic; and no
plaintext listener has to stay open for the supervisor alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from dataclasses import dataclass, replace
from typing import Any

from kafka.protocol.metadata import MetadataRequest

from brokercluster.layout import ClusterLayout
from brokercore.config import BrokerConfig
from brokercore.security.connection import (
    PLAINTEXT_CLIENT,
    AuthenticationFailed,
    ClientSecurity,
    authenticate,
    open_secured,
)
from brokercore.security.listeners import listener_specs

log = logging.getLogger(__name__)

# v2 is the oldest version with the controller and the cluster id; `topics=None` asks for
# all topics.
METADATA_VERSION = 2


ACTIVE_CONTROLLER = "kafka_controller_kafkacontroller_activecontrollercount"
LEADER_COUNT = "kafka_server_replicamanager_leadercount"


@dataclass(frozen=True)
class BrokerView:
    node_id: int
    cluster_id: str | None
    brokers: list[int]
    leaders: int
    partitions: int
    active_controller: bool | None = None  # None: no metrics endpoint answered


def probe_security(layout: ClusterLayout, extra: dict[str, str]) -> ClientSecurity:
    """How to reach a node's Kafka listener: as a broker of the cluster would (ConfigError,
    ValueError for a config that cannot say how)."""
    config = BrokerConfig.load(None, [f"{key}={value}"
                                      for key, value in layout.overrides(1, extra).items()])
    spec = next((spec for spec in listener_specs(config)
                 if spec.port == layout.node(1).kafka_port), None)
    return PLAINTEXT_CLIENT if spec is None else ClientSecurity.for_listener(config, spec)


async def observe(node_id: int, host: str, port: int, metrics_port: int,
                  within: float = 1.5, security: ClientSecurity = PLAINTEXT_CLIENT
                  ) -> BrokerView | None:
    """Metadata and, when its metrics endpoint answers, the controller and leader counts."""
    view, metrics = await asyncio.gather(probe(node_id, host, port, within, security),
                                         scrape(host, metrics_port, within))
    if view is None or not metrics:
        return view
    return replace(
        view, active_controller=metrics.get(ACTIVE_CONTROLLER) == 1,
        leaders=int(metrics.get(LEADER_COUNT, view.leaders)),
    )


async def scrape(host: str, port: int, within: float) -> dict[str, float]:
    """The unlabelled samples of a Prometheus text page at http://host:port/metrics."""
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(f"GET /metrics HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
                body = await reader.read()
            finally:
                writer.close()
    except (OSError, TimeoutError):
        return {}
    samples: dict[str, float] = {}
    for line in body.decode(errors="replace").split("\r\n\r\n", 1)[-1].splitlines():
        name, _, value = line.partition(" ")
        if name and not name.startswith("#") and "{" not in name:
            with contextlib.suppress(ValueError):
                samples[name] = float(value)
    return samples


async def probe(node_id: int, host: str, port: int, within: float = 1.5,
                security: ClientSecurity = PLAINTEXT_CLIENT) -> BrokerView | None:
    """What broker `node_id` reports, or None if it does not answer within `within` s."""
    try:
        return await asyncio.wait_for(_metadata(node_id, host, port, security), within)
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return None
    except AuthenticationFailed as exc:
        log.warning("node %d refused the probe's login on port %d: %s", node_id, port, exc)
        return None
    except Exception:  # an answer we cannot read must not take `status` down with it
        log.exception("node %d: unreadable Metadata answer on port %d", node_id, port)
        return None


async def _metadata(node_id: int, host: str, port: int,
                    security: ClientSecurity) -> BrokerView:
    reader, writer = await open_secured(host, port, security)
    correlation = 0

    async def send(request: Any, version: int) -> Any:
        nonlocal correlation
        correlation += 1
        request.with_header(correlation_id=correlation, client_id="millrace-cluster-supervisor")
        writer.write(bytes(request.encode(version=version, header=True, framed=True)))
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        frame = await reader.readexactly(size)
        return request.header.get_response_class().decode(frame, version=version, header=True)

    try:
        await authenticate(send, security)
        response: Any = await send(MetadataRequest(topics=None), METADATA_VERSION)
    finally:
        writer.close()
    partitions = [p for t in response.topics for p in t.partitions]
    return BrokerView(
        node_id=node_id,
        cluster_id=getattr(response, "cluster_id", None),
        brokers=sorted(int(b.node_id) for b in response.brokers),
        leaders=sum(1 for p in partitions if p.leader_id == node_id),
        partitions=len(partitions),
    )
