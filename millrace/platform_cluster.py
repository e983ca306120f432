"""The broker settings of the platform's built-in cluster (`manage.py platform`).

A three-broker cluster a user can restart a broker of without taking a topic offline:
every topic (auto-created ones and `__consumer_offsets` included) gets three replicas and
needs two in sync for `acks=all`. A dead broker is noticed after a 4 s session rather than
Kafka's 9 s, and preferred leaders come back within seconds of a broker's return instead of
Kafka's 300 s check. `python -m brokercore` on its own keeps Kafka's single-broker
defaults; only the platform passes these, as `--override` options, so an operator's own
`python -m brokercluster` gets Kafka's defaults too.

There is no `transaction.state.log.*` here: the broker has no transaction coordinator
(transactional producers are refused, brokercore/COMPAT.md), so no such topic exists.

Ports of a cluster with base port P (brokercore/CLUSTER.md): broker i serves Kafka on
P+i-1, the controller quorum on P+100+i-1 and Prometheus metrics on P+200+i-1. The
control center reaches brokers over the Kafka protocol only, so it restates that layout
here instead of importing brokercore.
"""

from __future__ import annotations

CONTROLLER_OFFSET = 100
METRICS_OFFSET = 200


def broker_config(brokers: int) -> dict[str, str]:
    """Kafka config keys for every broker of a platform cluster of `brokers` brokers."""
    replicas = min(3, brokers)
    return {
        "default.replication.factor": str(replicas),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        # Two of three in sync: one broker may be down and acks=all still succeeds.
        "min.insync.replicas": str(2 if replicas >= 3 else 1),
        "transaction.state.log.min.isr": str(2 if replicas >= 3 else 1),
        "broker.session.timeout.ms": "4000",
        "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "4000",
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": "5",
    }


def broker_ports(base_port: int, brokers: int) -> list[tuple[int, int, int, int]]:
    """(node id, Kafka port, controller port, metrics port) of each broker."""
    return [(i, base_port + i - 1, base_port + CONTROLLER_OFFSET + i - 1,
             base_port + METRICS_OFFSET + i - 1) for i in range(1, brokers + 1)]
