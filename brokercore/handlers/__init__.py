"""One module per Kafka API; importing this package registers them all."""

from brokercore.handlers import (  # noqa: F401
    api_versions,
    fetch,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)
