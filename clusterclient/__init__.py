"""The platform's one way to any Kafka cluster: metadata, admin calls, offsets and group lag
as typed values, through confluent-kafka. No Django; given bootstrap servers, not settings.
See README.md.
"""

from .client import ClusterClient
from .configs import (
    AcksAllShortfall,
    ConfigChange,
    ConfigEntry,
    ConfigOperation,
    ConfigSynonym,
    ResourceKind,
)
from .errors import ClusterRequestError, ClusterUnavailable
from .groups import (
    ConsumerGroup,
    GroupListing,
    GroupMember,
    GroupOffsets,
    GroupState,
    GroupType,
)
from .lag import GroupLag, PartitionLag, group_lag
from .metadata import (
    Broker,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
    TopicPartition,
)
from .offsets import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    ListedOffset,
    ListOffsetsResult,
    OffsetKind,
    OffsetQuery,
)

__all__ = [
    "EARLIEST", "LATEST", "MAX_TIMESTAMP", "AcksAllShortfall", "Broker", "ClusterClient",
    "ClusterMetadata",
    "ClusterRequestError", "ClusterUnavailable", "ConfigChange", "ConfigEntry",
    "ConfigOperation", "ConfigSynonym", "ConsumerGroup", "GroupLag", "GroupListing",
    "GroupMember", "GroupOffsets", "GroupState", "GroupType", "ListOffsetsResult",
    "ListedOffset", "OffsetKind",
    "OffsetQuery", "PartitionLag", "PartitionMetadata", "ResourceKind", "TopicMetadata",
    "TopicPartition", "group_lag",
]
