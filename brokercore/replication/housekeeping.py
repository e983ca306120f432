"""The periodic work on the logs this broker hosts, each every interval its broker config
sets: the log dirs' checkpoint files, retention, producer expiration, compaction and
time-based flushes. A piece of work that fails is logged and tried again next time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Callable, Mapping

from brokercore.config import BrokerConfig
from brokercore.log import KafkaStorageError
from brokercore.topic_partition import TopicPartition

from .checkpoint import LogDirCheckpoints
from .partition import Partition

log = logging.getLogger(__name__)


def start_housekeeping(config: BrokerConfig, partitions: Mapping[TopicPartition, Partition],
                       checkpoints: LogDirCheckpoints) -> list[asyncio.Task[None]]:
    """The tasks of the periodic work; the caller cancels them."""
    work = LogWork(config.node_id, partitions)
    tasks = []
    for key, file in (("replica.high.watermark.checkpoint.interval.ms",
                       checkpoints.high_watermarks),
                      ("log.flush.offset.checkpoint.interval.ms", checkpoints.recovery_points),
                      ("log.flush.start.offset.checkpoint.interval.ms", checkpoints.log_starts)):
        tasks.append(asyncio.create_task(every(
            config.get_int(key) / 1000, functools.partial(checkpoints.write, file))))
    retention_s = config.get_int("log.retention.check.interval.ms") / 1000
    tasks.append(asyncio.create_task(every(retention_s, work.retention)))
    expiration_s = config.get_int("producer.id.expiration.check.interval.ms") / 1000
    tasks.append(asyncio.create_task(every(expiration_s, work.expire_producers)))
    if config.get_bool("log.cleaner.enable"):
        backoff_s = config.get_int("log.cleaner.backoff.ms") / 1000
        tasks.append(asyncio.create_task(every(backoff_s, work.clean)))
    tasks.append(asyncio.create_task(every(1.0, work.flush_due)))
    return tasks


async def every(seconds: float, work: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            done = work()
            if inspect.isawaitable(done):
                await done
        except Exception:
            log.exception("background log work %s failed", getattr(work, "__name__", work))


class LogWork:
    """One round of each kind of work over the hosted partitions. A KafkaStorageError takes
    that partition's dir offline; the other partitions go on."""

    def __init__(self, node_id: int, partitions: Mapping[TopicPartition, Partition]) -> None:
        self.node_id = node_id
        self.partitions = partitions

    def retention(self) -> None:
        for partition in list(self.partitions.values()):
            with contextlib.suppress(KafkaStorageError):
                deleted = partition.log.enforce_retention()
                if deleted:
                    log.info("retention deleted %d segment(s) of %s", deleted, partition.tp)

    def expire_producers(self) -> None:
        """Every log, leader or follower, forgets its idle producers (Kafka's
        PeriodicProducerExpirationCheck, per log)."""
        for partition in list(self.partitions.values()):
            expired = partition.log.remove_expired_producers()
            if expired:
                log.debug("node %d: %s: %d producer id(s) expired", self.node_id, partition.tp,
                          expired)

    def clean(self) -> None:
        for partition in list(self.partitions.values()):
            if "compact" in partition.log.config.cleanup_policy:
                with contextlib.suppress(KafkaStorageError):
                    partition.log.clean()

    def flush_due(self) -> None:
        for partition in list(self.partitions.values()):
            with contextlib.suppress(KafkaStorageError):
                partition.log.flush_if_due()
