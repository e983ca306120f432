"""Topic-level log configuration, with Kafka's names and defaults."""

from dataclasses import dataclass

from brokercore.config import COMPRESSION_CODECS

INT64_MAX = 9223372036854775807


@dataclass(frozen=True)
class LogConfig:
    """One partition log's settings; field ``x_y`` is Kafka's topic config ``x.y``."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: frozenset[str] = frozenset({"delete"})
    max_message_bytes: int = 1048588
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    message_timestamp_type: str = "CreateTime"
    min_compaction_lag_ms: int = 0
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    compression_type: str = "producer"
    # Not a topic config: the broker's `producer.id.expiration.ms` (dynamic), which Kafka
    # hands every log in its ProducerStateManagerConfig.
    producer_id_expiration_ms: int = 86400000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def codec(self) -> int | None:
        """The codec every stored batch must have; None keeps the producer's."""
        return COMPRESSION_CODECS.get(self.compression_type)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
