"""The platform's one free-port helper: for the web server, the registry, the REST proxy,
a local cluster's block of broker ports, and the tests.

Imports nothing from the platform, so that brokercluster, controlcenter and tests can
all use it without crossing an import contract.
"""

from __future__ import annotations

import random
import socket

LOOPBACK = "127.0.0.1"
# A local cluster's node i listens on BASE+i-1 (Kafka), +100 (controller), +200 (metrics).
CONTROLLER_OFFSET = 100
METRICS_OFFSET = 200


def free_port(host: str = LOOPBACK) -> int:
    """A port the kernel has just found free on `host` (from its ephemeral range)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def ports_free(ports: list[int], host: str = LOOPBACK) -> bool:
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_base_port(brokers: int, host: str = LOOPBACK, low: int = 20000,
                   high: int = 32000) -> int:
    """A base port whose whole block (Kafka, controller and metrics ports of `brokers`
    nodes) is free now, below Linux's ephemeral range so that the kernel's own picks
    (clients, `free_port()`) do not collide with it later."""
    for _ in range(200):
        base = random.randrange(low, high - METRICS_OFFSET - brokers)
        ports = [p + off for p in range(base, base + brokers)
                 for off in (0, CONTROLLER_OFFSET, METRICS_OFFSET)]
        if ports_free(ports, host):
            return base
    raise OSError(f"no free block of ports for {brokers} brokers in {low}..{high}")
