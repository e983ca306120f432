"""The transaction coordinator: exactly-once transactions, with their state in
`__transaction_state`.

See README.md in this package for the state machine and the storage format.
"""

from __future__ import annotations

from brokercore.clock import Clock
from brokercore.config import BrokerConfig
from brokercore.controller.controller import Controller
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.security.connection import inter_broker_security

from .coordinator import TransactionCoordinator, TxnConfig
from .markers import MarkerChannel
from .state import TxnError, TxnState, fenced_for_version
from .state_topic import TRANSACTION_STATE_TOPIC, TransactionStateTopic
from .verification import TransactionVerifier

__all__ = [
    "TRANSACTION_STATE_TOPIC", "TransactionCoordinator", "TransactionVerifier", "TxnConfig",
    "TxnError", "TxnState", "broker_transaction_coordinator", "broker_transaction_verifier",
    "fenced_for_version",
]


def broker_transaction_coordinator(
    config: BrokerConfig, replicas: ReplicaManager, controller: Controller, clock: Clock
) -> TransactionCoordinator:
    """The transaction coordinator of a broker; `start()` loads the partitions it leads."""
    # A marker request waits for the partition's ISR on the leader (acks=all), which gives
    # up after offsets.commit.timeout.ms: twice that bounds a request to a stalled broker.
    timeout = 2 * config.get_int("offsets.commit.timeout.ms") / 1000
    return TransactionCoordinator(
        TransactionStateTopic(replicas, controller, config), clock,
        TxnConfig.from_broker(config), MarkerChannel(controller.image, config.node_id, timeout,
                                                    inter_broker_security(config)),
        controller.allocate_producer_id,
    )


def broker_transaction_verifier(
    config: BrokerConfig, coordinator: TransactionCoordinator, controller: Controller
) -> TransactionVerifier:
    """What a partition leader asks transaction coordinators (KIP-890): the coordinator of
    an id is the leader of its `__transaction_state` partition, as FindCoordinator names it."""
    def coordinator_of(transactional_id: str) -> int:
        return coordinator.store.leader(coordinator.partition_of(transactional_id))

    return TransactionVerifier(controller.image, config.node_id, coordinator_of,
                               config.get_int("request.timeout.ms") / 1000,
                               inter_broker_security(config))
