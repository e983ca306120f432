"""One module per Kafka API; importing this package registers them all."""

from brokercore.handlers import (  # noqa: F401
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)
