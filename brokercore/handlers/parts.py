"""The parts of a broker that API handlers work with, handed to every handler call.

Handlers reach the replica manager, the controller, the coordinators and the fetch
sessions through this
typed record, never through the `Broker` that owns them, so this package and the broker
that builds it import each other in one direction only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brokercore.config import BrokerConfig
from brokercore.controller.controller import Controller
from brokercore.controller.image import MetadataImage
from brokercore.coordinator import GroupCoordinator
from brokercore.handlers.fetch_sessions import FetchSessionCache
from brokercore.replication.replica_manager import ReplicaManager
from brokercore.security.authorizer import Authorizer
from brokercore.txn import TransactionCoordinator, TransactionVerifier


@dataclass(frozen=True)
class BrokerParts:
    node_id: int
    config: BrokerConfig
    replicas: ReplicaManager
    controller: Controller
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    verifier: TransactionVerifier  # asks coordinators before transactional appends (KIP-890)
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    # The StandardAuthorizer over the image's ACLs when `authorizer.class.name` names it;
    # off (allowing everything) by default
    authorizer: Authorizer = field(default_factory=Authorizer.off)

    @property
    def image(self) -> MetadataImage:
        return self.controller.image
