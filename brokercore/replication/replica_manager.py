"""The partitions this broker hosts, kept in step with the metadata image.

The replica manager listens to applied metadata records: a new partition assigned here opens
(or recovers) its log and takes the role the record gives it (leader, or follower of the
leader it names, fetched by one `ReplicaFetcher` per source broker); a removed topic deletes
its logs, a config change reconfigures them. As leader it shrinks and expands ISRs through
the controller's AlterPartition. It also runs the periodic work: ISR checks, high-watermark
checkpoints, retention, compaction and time-based flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from brokercore.clock import Clock
from brokercore.config import TOPIC_CONFIGS, BrokerConfig, ConfigSource
from brokercore.controller.image import MetadataImage
from brokercore.controller.records import (
    BrokerRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
)
from brokercore.log import LogConfig, PartitionLog
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .checkpoint import read_high_watermarks, write_high_watermarks
from .fetcher import ReplicaFetcher
from .log_dirs import LogDir, locate_partitions
from .log_mover import ReplicaMove, recover_moves
from .partition import Partition, PartitionError

log = logging.getLogger(__name__)

# controller.alter_partition(topic_id, partition, leader_id, leader_epoch, partition_epoch, isr)
AlterPartition = Callable[[str, int, int, int, int, list[int]], Awaitable[Any]]


class ReplicaManager:
    def __init__(
        self, config: BrokerConfig, image: MetadataImage, log_dirs: list[LogDir], clock: Clock
    ) -> None:
        self.config = config
        self.image = image
        self.log_dirs = log_dirs
        # The high-watermark checkpoint covers every dir's partitions, in the first dir.
        self.log_dir = log_dirs[0].path
        self.clock = clock
        self.node_id = config.node_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # Set by the broker to its controller's alter_partition; without it ISRs never change
        # (a lone broker, or tests that drive metadata themselves).
        self.alter_partition: AlterPartition | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._isr_changes: set[asyncio.Task[None]] = set()
        self._checkpointed: dict[TopicPartition, int] = {}
        self.placement: dict[TopicPartition, LogDir] = {}  # the dir of each hosted partition
        self._found: dict[str, LogDir] = {}  # partition dirs found at startup, not yet opened
        self.moves: dict[TopicPartition, ReplicaMove] = {}  # replicas moving between dirs
        self.offline: set[TopicPartition] = set()  # hosted here, on a dir that is offline

    # -- metadata -------------------------------------------------------------------------
    def load(self) -> None:
        """Open every partition the image assigns to this broker (startup)."""
        self._checkpointed = read_high_watermarks(self.log_dir)
        recover_moves(self.log_dirs)
        self._found = locate_partitions(self.log_dirs)
        for topic in self.image.topics.values():
            for index in topic.partitions:
                self._sync_partition(topic.name, index)
        self._delete_stray_logs()

    def on_metadata(self, record: MetadataRecord) -> None:
        match record:
            case PartitionRecord(topic_id=topic_id, partition=index) | PartitionChangeRecord(
                    topic_id=topic_id, partition=index):
                self._sync_partition(self.image.topics_by_id[topic_id].name, index)
            case RemoveTopicRecord(name=name):
                self.offline = {tp for tp in self.offline if tp.topic != name}
                for tp in [tp for tp in self.partitions if tp.topic == name]:
                    self._remove(tp)
            case ConfigRecord(resource="topic", name=name):
                self._reconfigure(name)
            case ConfigRecord(resource="broker", name=name) if name in ("", str(self.node_id)):
                for topic in {tp.topic for tp in self.partitions}:
                    self._reconfigure(topic)
            case BrokerRecord(node_id=node_id) if node_id in self.fetchers:
                self.fetchers[node_id].reconnect()

    def on_metadata_snapshot(self) -> None:
        """The image was replaced by the leader's snapshot: drop the partitions it no
        longer assigns here (or whose topic was re-created), then follow the rest."""
        for tp, partition in list(self.partitions.items()):
            topic = self.image.topics.get(tp.topic)
            if (topic is None or topic.topic_id != partition.topic_id
                    or tp.partition not in topic.partitions):
                self._remove(tp)
        for topic in list(self.image.topics.values()):
            for index in topic.partitions:
                self._sync_partition(topic.name, index)
            self._reconfigure(topic.name)

    def _reconfigure(self, topic_name: str) -> None:
        """Apply the topic's current configs (its overrides over the broker's) to its logs."""
        config = self.log_config(topic_name)
        min_isr = self.min_insync_replicas(topic_name)
        for tp, partition in self.partitions.items():
            if tp.topic == topic_name:
                partition.update_config(config)
                partition.min_insync_replicas = min_isr

    def _sync_partition(self, topic_name: str, index: int) -> None:
        topic = self.image.topics[topic_name]
        registration = topic.partitions[index]
        tp = TopicPartition(topic_name, index)
        partition = self.partitions.get(tp)
        if self.node_id not in registration.replicas:
            if partition is not None:  # reassigned away from this broker
                log.info("node %d: %s is no longer a replica here; deleting it",
                         self.node_id, tp)
                self._remove(tp)
            return
        if partition is None:
            partition = self._open_partition(tp, topic.topic_id)
            if partition is None:
                return
        partition.min_insync_replicas = self.min_insync_replicas(topic_name)
        epoch = registration.leader_epoch
        if registration.leader == self.node_id:
            if partition.become_leader(epoch, registration.partition_epoch,
                                       registration.replicas, registration.isr,
                                       self.clock.time_ms()):
                self._stop_fetching(tp)
                log.info("node %d: %s leader at epoch %d, ISR %s, high watermark %d",
                         self.node_id, tp, epoch, registration.isr, partition.high_watermark)
        elif partition.become_follower(registration.leader, epoch,
                                       registration.partition_epoch, registration.replicas,
                                       registration.isr):
            self._stop_fetching(tp)
            log.info("node %d: %s follows %d at epoch %d", self.node_id, tp,
                     registration.leader, epoch)
            if registration.leader >= 0:
                fetcher = self.fetchers.get(registration.leader)
                if fetcher is None:
                    fetcher = self.fetchers[registration.leader] = ReplicaFetcher(
                        self, registration.leader)
                fetcher.add(partition)

    def _open_partition(self, tp: TopicPartition, topic_id: str) -> Partition | None:
        """Open the partition's log from the dir holding it, or create it on the online
        dir with the fewest partitions. None if it was hosted here (it has a checkpointed
        high watermark) and is not found while a dir is offline: it is on that dir."""
        log_dir = self._found.pop(str(tp), None)
        if log_dir is None:
            offline = [d for d in self.log_dirs if not d.online]
            online = [d for d in self.log_dirs if d.online]
            if not online or (offline and tp in self._checkpointed):
                log.error("node %d: %s is offline: its log dir is unavailable",
                          self.node_id, tp)
                self.offline.add(tp)
                return None
            counts = Counter(d.path for d in self.placement.values())
            log_dir = min(online, key=lambda d: counts[d.path])
        plog = PartitionLog.open(log_dir.path / str(tp), self.log_config(tp.topic), self.clock)
        partition = Partition(tp, topic_id, plog, self.node_id, self._checkpointed.get(tp, 0))
        self.partitions[tp] = partition
        self.placement[tp] = log_dir
        return partition

    def _remove(self, tp: TopicPartition) -> None:
        self._stop_fetching(tp)
        self.placement.pop(tp, None)
        move = self.moves.pop(tp, None)
        if move is not None:
            move.cancel()
        partition = self.partitions.pop(tp)
        partition.become_follower(-1, partition.leader_epoch, partition.partition_epoch, [], [])
        partition.log.delete()

    def alter_log_dir(self, tp: TopicPartition, path: str) -> ErrorCode:
        """Start moving the replica to the log dir at `path` (AlterReplicaLogDirs)."""
        target = next((d for d in self.log_dirs
                       if path in (str(d.path), str(d.path.resolve()))), None)
        if target is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not target.online:
            return ErrorCode.KAFKA_STORAGE_ERROR
        partition = self.partitions.get(tp)
        if partition is None:
            topic = self.image.topics.get(tp.topic)
            if topic is None or tp.partition not in topic.partitions:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in self.offline:
                return ErrorCode.KAFKA_STORAGE_ERROR
            return ErrorCode.REPLICA_NOT_AVAILABLE
        move = self.moves.pop(tp, None)
        if move is not None and move.destination is target:
            self.moves[tp] = move
            return ErrorCode.NONE
        if move is not None:
            move.cancel()
        if self.placement[tp] is target:
            return ErrorCode.NONE
        # Kafka creates no future log while a dir is offline: it might hold the partition.
        if any(not d.online for d in self.log_dirs):
            return ErrorCode.KAFKA_STORAGE_ERROR
        self.moves[tp] = ReplicaMove(partition, target, self._moved)
        return ErrorCode.NONE

    def _moved(self, move: ReplicaMove) -> None:
        tp = move.partition.tp
        if self.moves.get(tp) is move:
            del self.moves[tp]
            if move.completed:
                self.placement[tp] = move.destination

    def _stop_fetching(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    def _delete_stray_logs(self) -> None:
        """Partition directories of topics deleted while this broker was down."""
        for name, log_dir in self._found.items():
            path = log_dir.path / name
            log.info("deleting stray log directory %s", path)
            shutil.rmtree(path, ignore_errors=True)
        self._found = {}

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

    # -- leader: follower progress and the ISR ----------------------------------------------
    def record_follower_fetch(self, partition: Partition, replica_id: int, offset: int,
                              log_start_offset: int) -> bool:
        """A follower's Fetch at `offset`; False if it is not a replica of the partition."""
        if not partition.update_follower_fetch(replica_id, offset, log_start_offset,
                                               self.clock.time_ms()):
            return False
        if partition.pending_isr is None and partition.may_join_isr(replica_id):
            broker = self.image.brokers.get(replica_id)
            if broker is not None and not broker.fenced:
                self._propose_isr(partition, [*partition.isr, replica_id])
        return True

    def _shrink_isrs(self) -> None:
        lag_max_ms = self.config.get_int("replica.lag.time.max.ms")
        now = self.clock.time_ms()
        for partition in list(self.partitions.values()):
            if not partition.is_leader:
                continue
            lagging = partition.out_of_sync_replicas(now, lag_max_ms)
            partition.mark_out_of_sync(lagging)
            if lagging and partition.pending_isr is None:
                log.info("node %d: %s followers %s are out of sync; shrinking ISR %s",
                         self.node_id, partition.tp, lagging, partition.isr)
                self._propose_isr(partition, [r for r in partition.isr if r not in lagging])

    def _propose_isr(self, partition: Partition, isr: list[int]) -> None:
        if self.alter_partition is None:
            return
        partition.pending_isr = isr
        task = asyncio.create_task(self._alter_isr(partition, isr))
        self._isr_changes.add(task)
        task.add_done_callback(self._isr_changes.discard)

    async def _alter_isr(self, partition: Partition, isr: list[int]) -> None:
        assert self.alter_partition is not None
        try:
            await self.alter_partition(partition.topic_id, partition.tp.partition, self.node_id,
                                       partition.leader_epoch, partition.partition_epoch, isr)
        except Exception as exc:  # ControllerError, or the quorum being unreachable
            log.info("node %d: %s ISR change to %s refused: %s", self.node_id, partition.tp,
                     isr, getattr(exc, "error_code", exc))
        finally:
            # Accepted: the record is applied by now and has cleared it already.
            if partition.pending_isr is isr:
                partition.pending_isr = None
                partition.maybe_increment_high_watermark()

    # -- high-watermark checkpoint -----------------------------------------------------------
    def checkpoint_high_watermarks(self) -> None:
        offsets = {tp: p.high_watermark for tp, p in self.partitions.items()}
        if offsets != self._checkpointed:
            write_high_watermarks(self.log_dir, offsets)
            self._checkpointed = offsets

    # -- background log work --------------------------------------------------------------
    def start(self) -> None:
        lag_s = self.config.get_int("replica.lag.time.max.ms") / 1000
        self._tasks.append(asyncio.create_task(self._every(lag_s / 2, self._shrink_isrs)))
        checkpoint_s = self.config.get_int("replica.high.watermark.checkpoint.interval.ms") / 1000
        self._tasks.append(
            asyncio.create_task(self._every(checkpoint_s, self.checkpoint_high_watermarks))
        )
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
        for move in self.moves.values():  # unfinished moves are given up, as after a crash
            move.cancel()
        self.moves = {}
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        tasks = [*self._tasks, *self._isr_changes]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            self.checkpoint_high_watermarks()
        except OSError:
            log.exception("node %d: cannot checkpoint high watermarks", self.node_id)
        for partition in self.partitions.values():
            partition.log.close()
