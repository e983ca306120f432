"""A topic's configs as this broker applies them: its overrides from the metadata image over
the broker's defaults, and the `LogConfig` its partition logs are opened with."""

from __future__ import annotations

from brokercore.config import TOPIC_CONFIGS, BrokerConfig, ConfigSource
from brokercore.controller.image import MetadataImage
from brokercore.log import LogConfig


class TopicConfigs:
    def __init__(self, config: BrokerConfig, image: MetadataImage) -> None:
        self.config = config
        self.image = image

    def topic_config(self, topic_name: str) -> dict[str, tuple[str | None, ConfigSource]]:
        """Every topic config with its value and source."""
        overrides = self.image.topics[topic_name].configs
        return {
            name: (overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
            if name in overrides
            else self.config.topic_default(name)
            for name in TOPIC_CONFIGS
        }

    def min_insync_replicas(self, topic_name: str) -> int:
        return int(self.topic_config(topic_name)["min.insync.replicas"][0] or 1)

    def log_config(self, topic_name: str) -> LogConfig:
        values = {name: value for name, (value, _) in self.topic_config(topic_name).items()}

        def num(name: str) -> int:
            return int(values[name] or TOPIC_CONFIGS[name].default or 0)

        return LogConfig(
            segment_bytes=num("segment.bytes"),
            segment_ms=num("segment.ms"),
            segment_index_bytes=num("segment.index.bytes"),
            index_interval_bytes=num("index.interval.bytes"),
            retention_ms=num("retention.ms"),
            retention_bytes=num("retention.bytes"),
            cleanup_policy=frozenset((values["cleanup.policy"] or "delete").split(",")),
            max_message_bytes=num("max.message.bytes"),
            flush_messages=num("flush.messages"),
            flush_ms=num("flush.ms"),
            message_timestamp_type=values["message.timestamp.type"] or "CreateTime",
            min_compaction_lag_ms=num("min.compaction.lag.ms"),
            delete_retention_ms=num("delete.retention.ms"),
            min_cleanable_dirty_ratio=float(values["min.cleanable.dirty.ratio"] or 0.5),
            file_delete_delay_ms=num("file.delete.delay.ms"),
            compression_type=values["compression.type"] or "producer",
            producer_id_expiration_ms=self.config.get_int("producer.id.expiration.ms"),
        )
