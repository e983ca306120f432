"""Authorization rules that several API handlers share (Kafka's AuthHelper)."""

from brokercore.controller.controller import ControllerError
from brokercore.handlers.parts import BrokerParts
from brokercore.protocol.context import RequestContext
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import CLUSTER_NAME, AclOperation, ResourceType

AUTHORIZATION_FAILED = "Authorization failed."
# KIP-430's authorized-operations fields: kafka-python's codec takes the bitfield as the set
# of its bits, and encodes None as -2147483648, "not requested"
NOT_REQUESTED = None


def may_create_topic(broker: BrokerParts, ctx: RequestContext, name: str) -> bool:
    """Kafka's rule for CreateTopics and auto-creation: CREATE on the cluster or the topic."""
    authorizer = broker.authorizer
    return (authorizer.authorize_cluster(ctx, AclOperation.CREATE)
            or authorizer.authorize_topic(ctx, AclOperation.CREATE, name))


def cluster_refused() -> ControllerError:
    """The error of an API that needs an operation on the cluster the principal lacks."""
    return ControllerError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                           "Cluster authorization failed.")


def cluster_operations(broker: BrokerParts, ctx: RequestContext,
                       requested: bool) -> frozenset[int] | None:
    """KIP-430's cluster_authorized_operations (Metadata v8-10, DescribeCluster): what the
    principal may do on the cluster, none without DESCRIBE on it, as Kafka answers."""
    if not requested:
        return NOT_REQUESTED
    authorizer = broker.authorizer
    if not authorizer.authorize_cluster(ctx, AclOperation.DESCRIBE, audit=False):
        return frozenset()
    return authorizer.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
