"""The partitions this broker hosts, kept in step with the metadata image.

The replica manager listens to applied metadata records: a new partition assigned here opens
(or recovers) its log, a removed topic deletes its logs, a config change reconfigures them.
It also runs the periodic log work: retention, compaction and time-based flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Iterable
from pathlib import Path

from brokercore.clock import Clock
from brokercore.config import TOPIC_CONFIGS, BrokerConfig, ConfigSource
from brokercore.controller.image import MetadataImage, Record
from brokercore.log import LogConfig, PartitionLog
from brokercore.protocol.errors import ErrorCode

from .partition import Partition, PartitionError, TopicPartition

log = logging.getLogger(__name__)


class ReplicaManager:
    def __init__(
        self, config: BrokerConfig, image: MetadataImage, log_dir: Path, clock: Clock
    ) -> None:
        self.config = config
        self.image = image
        self.log_dir = log_dir
        self.clock = clock
        self.node_id = config.node_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # -- metadata -------------------------------------------------------------------------
    def load(self) -> None:
        """Open every partition the image assigns to this broker (startup)."""
        for topic in self.image.topics.values():
            for index in topic.partitions:
                self._sync_partition(topic.name, index)
        self._delete_stray_logs()

    def on_metadata(self, record: Record) -> None:
        kind = record["type"]
        if kind in ("partition", "partition_change"):
            topic = self.image.topics_by_id[record["topic_id"]]
            self._sync_partition(topic.name, record["partition"])
        elif kind == "remove_topic":
            for tp in [tp for tp in self.partitions if tp.topic == record["name"]]:
                self.partitions.pop(tp).log.delete()
        elif kind == "config" and record["resource"] == "topic":
            config = self.log_config(record["name"])
            for tp, partition in self.partitions.items():
                if tp.topic == record["name"]:
                    partition.update_config(config)

    def _sync_partition(self, topic_name: str, index: int) -> None:
        topic = self.image.topics[topic_name]
        registration = topic.partitions[index]
        tp = TopicPartition(topic_name, index)
        if self.node_id not in registration.replicas:
            return
        partition = self.partitions.get(tp)
        if partition is None:
            config = self.log_config(topic_name)
            plog = PartitionLog.open(self.log_dir / str(tp), config, self.clock)
            partition = Partition(tp, topic.topic_id, plog)
            self.partitions[tp] = partition
        partition.leader = registration.leader
        if registration.leader == self.node_id:
            partition.become_leader(
                registration.leader_epoch, registration.replicas, registration.isr
            )

    def _delete_stray_logs(self) -> None:
        """Partition directories of topics deleted while this broker was down."""
        wanted = {str(tp) for tp in self.partitions}
        for path in self.log_dir.iterdir():
            partition_dir = path.is_dir() and "-" in path.name
            if partition_dir and not path.name.startswith("__cluster") and path.name not in wanted:
                log.info("deleting stray log directory %s", path)
                shutil.rmtree(path, ignore_errors=True)

    # -- configs --------------------------------------------------------------------------
    def topic_config(self, topic_name: str) -> dict[str, tuple[str | None, ConfigSource]]:
        """Every topic config with its value and source."""
        overrides = self.image.topics[topic_name].configs
        return {
            name: (overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
            if name in overrides
            else self.config.topic_default(name)
            for name in TOPIC_CONFIGS
        }

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
        )

    # -- lookups --------------------------------------------------------------------------
    def leader_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it, else the error a client should see."""
        partition = self.partitions.get(tp)
        if partition is None:
            topic = self.image.topics.get(tp.topic)
            if topic is None or tp.partition not in topic.partitions:
                raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if partition.leader != self.node_id:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    async def wait_for_data(self, partitions: Iterable[Partition], max_wait: float) -> None:
        """Return when any of the partitions gets new data, or after max_wait seconds."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        parts = list(partitions)
        for partition in parts:
            partition.add_waiter(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, max_wait)
        finally:
            for partition in parts:
                partition.discard_waiter(waiter)

    # -- background log work --------------------------------------------------------------
    def start(self) -> None:
        retention_s = self.config.get_int("log.retention.check.interval.ms") / 1000
        self._tasks.append(asyncio.create_task(self._every(retention_s, self._retention)))
        if self.config.get_bool("log.cleaner.enable"):
            backoff_s = self.config.get_int("log.cleaner.backoff.ms") / 1000
            self._tasks.append(asyncio.create_task(self._every(backoff_s, self._clean)))
        self._tasks.append(asyncio.create_task(self._every(1.0, self._flush_due)))

    async def _every(self, seconds: float, work: object) -> None:
        assert callable(work)
        while True:
            await asyncio.sleep(seconds)
            try:
                work()
            except Exception:
                log.exception("background log work %s failed", getattr(work, "__name__", work))

    def _retention(self) -> None:
        for partition in list(self.partitions.values()):
            deleted = partition.log.enforce_retention()
            if deleted:
                log.info("retention deleted %d segment(s) of %s", deleted, partition.tp)

    def _clean(self) -> None:
        for partition in list(self.partitions.values()):
            if "compact" in partition.log.config.cleanup_policy:
                partition.log.clean()

    def _flush_due(self) -> None:
        for partition in list(self.partitions.values()):
            partition.log.flush_if_due()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for partition in self.partitions.values():
            partition.log.close()
