"""The partitions this broker hosts, kept in step with the metadata image.

The replica manager listens to applied metadata records: a new partition assigned here opens
(or recovers) its log and takes the role the record gives it (leader, or follower of the
leader it names, fetched by one `ReplicaFetcher` per source broker); a removed topic deletes
its logs, a config change reconfigures them. As leader it shrinks and expands ISRs through
the controller's AlterPartition. It also runs the periodic work: ISR checks, high-watermark
checkpoints, retention, compaction and time-based flushes.

Records are applied on the event loop, inside the metadata quorum's apply step, so that step
must stay short whatever a record batch holds (a topic of 1,000 partitions is one batch).
Role changes of open partitions are in-memory and happen at once. The disk work, opening or
creating logs and deleting removed ones, goes to a worker thread in batches of
`OPEN_BATCH` (`_open_pending`); each batch's partitions are installed back on the loop
with the role the image gives them by then. The loop stays free for heartbeats, Raft and
clients meanwhile, and `settled()` waits for the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import logging
import shutil
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokercore.clock import Clock
from brokercore.config import TOPIC_CONFIGS, BrokerConfig, ConfigSource
from brokercore.controller.image import MetadataImage, PartitionRegistration
from brokercore.controller.records import (
    BrokerRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
)
from brokercore.log import KafkaStorageError, LogConfig, PartitionLog
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .checkpoint import DirCheckpoint
from .fetcher import ReplicaFetcher
from .log_dirs import LogDir, locate_partitions
from .log_mover import ReplicaMove, recover_moves
from .partition import Partition, PartitionError

log = logging.getLogger(__name__)

# controller.alter_partition(topic_id, partition, leader_id, leader_epoch, partition_epoch, isr)
AlterPartition = Callable[[str, int, int, int, int, list[int]], Awaitable[Any]]

# Logs opened per trip to the worker thread: a new empty log costs a few file creations, a
# new leadership two fsyncs (its leader-epoch checkpoint), so a batch is tens of ms of disk
# work, and the loop installs one batch in a few ms.
OPEN_BATCH = 50
DISK_THREADS = 8


@dataclass(frozen=True)
class _Opening:
    """A log to open off the loop, and the leader epoch to record in it if it will lead."""

    tp: TopicPartition
    topic_id: str
    config: LogConfig
    lead_epoch: int | None
    log_dir: LogDir
    recovery_point: int | None  # the dir's checkpointed values, if it lists the partition
    log_start_offset: int | None


class ReplicaManager:
    def __init__(
        self, config: BrokerConfig, image: MetadataImage, log_dirs: list[LogDir], clock: Clock
    ) -> None:
        self.config = config
        self.image = image
        self.log_dirs = log_dirs
        self.clock = clock
        self.node_id = config.node_id
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # Set by the broker to its controller's alter_partition; without it ISRs never change
        # (a lone broker, or tests that drive metadata themselves).
        self.alter_partition: AlterPartition | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._isr_changes: set[asyncio.Task[None]] = set()
        # Each dir's checkpoint files (`checkpoint.py`), written on the disk threads.
        self.high_watermarks = DirCheckpoint("replication-offset-checkpoint", any_dir=True)
        self.recovery_points = DirCheckpoint("recovery-point-offset-checkpoint", any_dir=False)
        self.log_starts = DirCheckpoint("log-start-offset-checkpoint", any_dir=True)
        self._values: dict[DirCheckpoint, Callable[[Partition], int]] = {  # what each records
            self.high_watermarks: lambda partition: partition.high_watermark,
            self.recovery_points: lambda partition: partition.log.recovery_point,
            self.log_starts: lambda partition: partition.log.log_start_offset,
        }
        self._checkpointing = asyncio.Lock()  # one writer of each file at a time
        self._checkpoint_soon: asyncio.Task[None] | None = None
        self._logs_changed = False  # a truncation or a move since `_checkpoint_soon` began
        # In the order they were assigned; True for a replica new to this broker (assigned
        # after startup), which may be created in any online dir.
        self._to_open: dict[TopicPartition, bool] = {}
        self._to_delete: list[PartitionLog] = []  # removed, files still on disk
        self._opener: asyncio.Task[None] | None = None
        # New leaderships whose epoch checkpoint is still to be written, off the loop.
        self._epochs_to_persist: dict[TopicPartition, Partition] = {}
        self._epoch_writer: asyncio.Task[None] | None = None
        # Several threads, as most of the work is waiting on fsyncs, which the file system
        # commits together.
        self._disk = ThreadPoolExecutor(DISK_THREADS, thread_name_prefix=f"logs-{self.node_id}")
        self.placement: dict[TopicPartition, LogDir] = {}  # the dir of each hosted partition
        self._found: dict[str, LogDir] = {}  # partition dirs found at startup, not yet opened
        self.moves: dict[TopicPartition, ReplicaMove] = {}  # replicas moving between dirs
        self.offline: set[TopicPartition] = set()  # hosted here, on a dir that is offline
        # Told of each dir that goes offline while the broker runs (the broker reports it to
        # the controller, or shuts down when none is left).
        self.on_dir_offline: Callable[[LogDir], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- metadata -------------------------------------------------------------------------
    async def load(self) -> None:
        """Open every partition the image assigns to this broker (startup)."""
        for log_dir in self.log_dirs:
            if log_dir.online:
                for file in self._values:
                    file.read(log_dir.path)
        recover_moves(self.log_dirs)
        self._found = locate_partitions(self.log_dirs)
        for topic in self.image.topics.values():
            for index in topic.partitions:
                self._sync_partition(topic.name, index, new=False)
        await self.settled()
        self._delete_stray_logs()
        await self._upgrade_checkpoints()

    async def settled(self, within: float | None = None) -> bool:
        """Wait until every log assigned or removed so far is open or deleted; False if
        that took longer than `within` seconds (the work goes on)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                while self._opener is not None and not self._opener.done():
                    await asyncio.wait([self._opener])  # never cancels it
                return True
        return False

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

    def _sync_partition(self, topic_name: str, index: int, new: bool = True) -> None:
        registration = self.image.topics[topic_name].partitions[index]
        tp = TopicPartition(topic_name, index)
        partition = self.partitions.get(tp)
        if self.node_id not in registration.replicas:
            if partition is not None:  # reassigned away from this broker
                log.info("node %d: %s is no longer a replica here; deleting it",
                         self.node_id, tp)
                self._remove(tp)
            return
        if partition is None:
            if tp not in self.offline:  # its dir holds it; it stays offline until a restart
                self._open_later(tp, new)
        else:
            self._take_role(partition, registration)

    def _take_role(self, partition: Partition, registration: PartitionRegistration) -> None:
        tp = partition.tp
        partition.min_insync_replicas = self.min_insync_replicas(tp.topic)
        epoch = registration.leader_epoch
        if registration.leader == self.node_id:
            try:
                led = partition.become_leader(epoch, registration.partition_epoch,
                                              registration.replicas, registration.isr,
                                              self.clock.time_ms(), persist_epoch=False)
            except KafkaStorageError:  # its dir went offline
                log.error("node %d: %s cannot lead: its log dir failed", self.node_id, tp)
                return
            if partition.log.epochs.dirty:
                self._persist_epoch_later(partition)
            if led:
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
                        registration.leader, self.node_id, self.config, self.image, self.clock)
                fetcher.add(partition)

    def _remove(self, tp: TopicPartition) -> None:
        self._stop_fetching(tp)
        self._epochs_to_persist.pop(tp, None)
        self.placement.pop(tp, None)
        move = self.moves.pop(tp, None)
        if move is not None:
            move.cancel()
        partition = self.partitions.pop(tp)
        partition.become_follower(-1, partition.leader_epoch, partition.partition_epoch, [], [])
        self._to_delete.append(partition.log)
        self._start_opener()

    # -- opening and deleting logs off the loop ---------------------------------------------
    def _open_later(self, tp: TopicPartition, new: bool) -> None:
        self._to_open[tp] = self._to_open.get(tp, True) and new
        self._start_opener()

    def _start_opener(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._opener is None or self._opener.done():
            self._opener = asyncio.create_task(self._open_pending(),
                                               name=f"open-logs-{self.node_id}")

    async def _open_pending(self) -> None:
        """Delete removed logs, then open assigned ones, a batch per trip to the thread.

        A log is deleted before any log is opened in the same trip, so a topic deleted and
        created again under its name gets a new directory. What the image says is read
        when a batch is planned and again when it is installed: records applied while the
        thread works (a new leader, the topic deleted) are never lost."""
        loop = asyncio.get_running_loop()
        while self._to_open or self._to_delete:
            to_delete, self._to_delete = self._to_delete, []
            batch = [(tp, self._to_open.pop(tp))
                     for tp in list(itertools.islice(self._to_open, OPEN_BATCH))]
            openings = [o for o in itertools.starmap(self._plan_opening, batch)
                        if o is not None]
            await asyncio.gather(*(loop.run_in_executor(self._disk, self._delete_log, plog)
                                   for plog in to_delete))
            opened = await asyncio.gather(*(loop.run_in_executor(self._disk, self._open_log, o)
                                            for o in openings))
            for opening, plog in zip(openings, opened, strict=True):
                if isinstance(plog, OSError):  # the dir failed: it goes offline, and the log
                    self._fail_dir(opening.log_dir, str(plog))
                if not isinstance(plog, PartitionLog):
                    self.placement.pop(opening.tp, None)
                    continue
                try:
                    self._install(opening, plog)
                except Exception:  # a bug, or its epoch checkpoint failed: not hosted
                    log.exception("node %d: cannot host %s", self.node_id, opening.tp)

    def _plan_opening(self, tp: TopicPartition, new: bool) -> _Opening | None:
        registration = self._wanted(tp, None)
        if registration is None or tp in self.partitions or tp in self.offline:
            return None
        log_dir = self._choose_dir(tp, new)
        if log_dir is None:
            return None
        self.placement[tp] = log_dir  # reserved now, so a batch spreads over the dirs
        lead = registration.leader_epoch if registration.leader == self.node_id else None
        topic_id = self.image.topics[tp.topic].topic_id
        return _Opening(tp, topic_id, self.log_config(tp.topic), lead, log_dir,
                        self.recovery_points.lookup(tp, log_dir.path),
                        self.log_starts.lookup(tp, log_dir.path))

    def _choose_dir(self, tp: TopicPartition, new: bool) -> LogDir | None:
        """The dir holding the partition's log, or the online dir with the fewest partitions
        for a new replica. None if the replica is not new (assigned before this start) and
        is not found while a dir is offline: it may be on that dir. Kafka's rule (it
        creates no log that is not new while a dir is offline): a second, empty copy of a
        replica would be taken for the real one."""
        log_dir = self._found.pop(str(tp), None)
        if log_dir is not None:
            return log_dir
        online = [d for d in self.log_dirs if d.online]
        if not online or (not new and len(online) < len(self.log_dirs)):
            log.error("node %d: %s is offline: its log dir is unavailable", self.node_id, tp)
            self.offline.add(tp)
            return None
        counts = Counter(d.path for d in self.placement.values())
        return min(online, key=lambda d: counts[d.path])

    def _wanted(self, tp: TopicPartition, topic_id: str | None) -> PartitionRegistration | None:
        """The partition's registration if this broker is a replica of it (of `topic_id`)."""
        topic = self.image.topics.get(tp.topic)
        if topic is None or (topic_id is not None and topic.topic_id != topic_id):
            return None
        registration = topic.partitions.get(tp.partition)
        if registration is None or self.node_id not in registration.replicas:
            return None
        return registration

    def _delete_log(self, plog: PartitionLog) -> None:
        """On a disk thread."""
        try:
            plog.delete()
        except OSError:  # the next start deletes it as a stray
            log.exception("node %d: cannot delete %s", self.node_id, plog.directory)

    def _open_log(self, opening: _Opening) -> PartitionLog | OSError | None:
        """On a disk thread: the log belongs to no partition yet, nor to the loop. An
        OSError (the dir failing) is returned for the loop to take the dir offline."""
        try:
            plog = PartitionLog.open(opening.log_dir.path / str(opening.tp), opening.config,
                                     self.clock, recovery_point=opening.recovery_point,
                                     log_start_offset=opening.log_start_offset)
            self.watch(plog)
            if opening.lead_epoch is not None:  # as become_leader would, on the loop
                plog.assign_epoch(opening.lead_epoch, plog.log_end_offset)
        except OSError as exc:
            log.error("node %d: cannot open the log of %s: %s", self.node_id, opening.tp, exc)
            return exc
        except KafkaStorageError:  # its dir goes offline (`_log_failed`)
            return None
        except Exception:
            log.exception("node %d: cannot open the log of %s", self.node_id, opening.tp)
            return None
        return plog

    def _install(self, opening: _Opening, plog: PartitionLog) -> None:
        """Back on the loop: host the opened log with the role the image gives it now.

        The partition is not hosted yet: a partition is planned only then, and one trip
        runs at a time."""
        tp = opening.tp
        if not opening.log_dir.online:  # the dir failed meanwhile; the replica is offline
            plog.fail(OSError(f"log dir {opening.log_dir.path} is offline"))
            return
        registration = self._wanted(tp, opening.topic_id)
        if registration is None:  # removed (or its topic replaced) meanwhile
            self.placement.pop(tp, None)
            self._to_delete.append(plog)
            return
        config = self.log_config(tp.topic)
        if config != opening.config:  # a config record came meanwhile
            plog.update_config(config)
        partition = Partition(tp, opening.topic_id, plog, self.node_id,
                              self.high_watermarks.lookup(tp, opening.log_dir.path) or 0)
        self.partitions[tp] = partition
        self._take_role(partition, registration)

    # -- leader-epoch checkpoints off the loop ----------------------------------------------
    def _persist_epoch_later(self, partition: Partition) -> None:
        self._epochs_to_persist[partition.tp] = partition
        if self._epoch_writer is None or self._epoch_writer.done():
            self._epoch_writer = asyncio.create_task(self._persist_epochs(),
                                                     name=f"epoch-checkpoints-{self.node_id}")

    async def _persist_epochs(self) -> None:
        """Write the epoch checkpoints of new leaderships on the disk threads, a batch per
        trip: a failover of hundreds of partitions costs the loop no fsync. Each is a
        snapshot taken here, on the loop; a newer change writes its own."""
        loop = asyncio.get_running_loop()
        while self._epochs_to_persist:
            batch = [self._epochs_to_persist.pop(tp)
                     for tp in list(itertools.islice(self._epochs_to_persist, OPEN_BATCH))]
            await asyncio.gather(*(
                loop.run_in_executor(self._disk, self._write_epochs, p, p.log.epochs.snapshot())
                for p in batch if self.partitions.get(p.tp) is p))

    def _write_epochs(self, partition: Partition,
                      snapshot: tuple[int, list[tuple[int, int]]]) -> None:
        """On a disk thread. An I/O error fails the log on the loop, and its dir with it."""
        try:
            partition.log.epochs.persist(snapshot)
        except OSError as exc:
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._epochs_not_written, partition, exc)

    def _epochs_not_written(self, partition: Partition, error: OSError) -> None:
        # A partition removed meanwhile had its directory deleted under the write: no fault.
        if self.partitions.get(partition.tp) is partition:
            log.error("node %d: cannot write the epoch checkpoint of %s: %s", self.node_id,
                      partition.tp, error)
            partition.log.fail(error)

    # -- log dirs failing while the broker runs (KIP-112) -------------------------------------
    def watch(self, plog: PartitionLog) -> None:
        """Hear of the log's I/O errors and truncations (any thread)."""
        plog.on_failure = self._log_failed
        plog.on_truncated = self._log_truncated

    def _log_failed(self, plog: PartitionLog, error: OSError) -> None:
        """A log met an I/O error (on the loop or a disk thread): its dir goes offline."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._fail_dir_of, plog.directory, str(error))

    def _fail_dir_of(self, directory: Path, reason: str) -> None:
        for log_dir in self.log_dirs:
            if log_dir.path == directory.parent:
                self._fail_dir(log_dir, reason)

    def _fail_dir(self, log_dir: LogDir, reason: str) -> None:
        """Take the dir offline, and every replica in it: they leave `partitions` (clients
        get KAFKA_STORAGE_ERROR), their fetching stops, their logs are closed without
        writing, and moves into or out of the dir are given up. The broker reports the
        replicas to the controller, which moves their leaderships and ISRs elsewhere; they
        come back with a restart once the dir is repaired."""
        if not log_dir.online:
            return
        log.error("node %d: log dir %s is offline: %s", self.node_id, log_dir.path, reason)
        log_dir.error = reason
        for tp, move in list(self.moves.items()):
            if move.destination is log_dir or self.placement.get(tp) is log_dir:
                del self.moves[tp]
                with contextlib.suppress(Exception):  # its files may be on the failed dir
                    move.cancel()
        lost = [tp for tp, d in self.placement.items() if d is log_dir]
        for tp in lost:
            self._take_offline(tp, reason)
        log.error("node %d: %d replica(s) offline with %s", self.node_id, len(lost),
                  log_dir.path)
        if self.on_dir_offline is not None:
            self.on_dir_offline(log_dir)

    def _take_offline(self, tp: TopicPartition, reason: str) -> None:
        self.placement.pop(tp)
        self.offline.add(tp)
        partition = self.partitions.pop(tp, None)
        if partition is None:  # still being opened: `_install` finds the dir offline
            return
        self._stop_fetching(tp)
        # Waiting produces and fetches see the leadership end.
        partition.become_follower(-1, partition.leader_epoch, partition.partition_epoch,
                                  partition.replicas, partition.isr)
        partition.log.fail(OSError(reason))

    def offline_replicas(self) -> list[TopicPartition]:
        """Replicas assigned here whose dir is offline: what the heartbeat reports."""
        return sorted((tp for tp in self.offline if self._wanted(tp, None) is not None),
                      key=lambda tp: (tp.topic, tp.partition))

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
                self.watch(move.partition.log)
                self._checkpoint_logs_soon()

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
            producer_id_expiration_ms=self.config.get_int("producer.id.expiration.ms"),
        )

    # -- lookups --------------------------------------------------------------------------
    def leader_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it, else the error a client should see."""
        partition = self.partitions.get(tp)
        if partition is None:
            topic = self.image.topics.get(tp.topic)
            if topic is None or tp.partition not in topic.partitions:
                raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if tp in self.offline:
                raise PartitionError(ErrorCode.KAFKA_STORAGE_ERROR,
                                     f"{tp}'s log dir on broker {self.node_id} is offline")
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

    # -- the log dirs' checkpoint files ------------------------------------------------------
    async def checkpoint(self, *files: DirCheckpoint) -> None:
        """Rewrite each online dir's files (all three if none is named) that changed, on the
        disk threads, each listing that dir's partitions only. A dir whose write fails goes
        offline; the others are written all the same. A write under way when the caller is
        cancelled (a stop) still finishes before the next one starts: two threads must
        never write one file."""
        async with self._checkpointing:
            online = [d for d in self.log_dirs if d.online]
            writes: list[tuple[DirCheckpoint, LogDir, dict[TopicPartition, int]]] = []
            for file in files or self._values:
                by_dir: dict[Path, dict[TopicPartition, int]] = {d.path: {} for d in online}
                for tp, partition in self.partitions.items():
                    offsets = by_dir.get(self.placement[tp].path)
                    if offsets is not None:
                        offsets[tp] = self._values[file](partition)
                writes += [(file, d, by_dir[d.path]) for d in online
                           if file.stale(d.path, by_dir[d.path])]
            loop = asyncio.get_running_loop()
            writing = asyncio.gather(
                *(loop.run_in_executor(self._disk, file.write, d.path, offsets)
                  for file, d, offsets in writes), return_exceptions=True)
            try:
                results = await asyncio.shield(writing)
            except asyncio.CancelledError:
                await writing
                raise
            for (file, log_dir, offsets), result in zip(writes, results, strict=True):
                if isinstance(result, OSError):
                    self._fail_dir(log_dir, str(result))
                elif isinstance(result, BaseException):
                    log.error("node %d: cannot write %s in %s: %r", self.node_id, file.name,
                              log_dir.path, result)
                else:
                    file.written[log_dir.path] = offsets

    async def _upgrade_checkpoints(self) -> None:
        """At startup, once the dirs' checkpoints list every log: the recovery points and
        log starts that earlier versions kept in each partition's directory go."""
        await self.checkpoint(self.recovery_points, self.log_starts)
        old = [p.log for tp, p in self.partitions.items()
               if p.log.legacy_checkpoints and tp in self.log_starts.written.get(
                   self.placement[tp].path, {})]
        if old:
            loop = asyncio.get_running_loop()
            await asyncio.gather(*(loop.run_in_executor(self._disk, plog.drop_legacy_checkpoints)
                                   for plog in old), return_exceptions=True)

    def _log_truncated(self, plog: PartitionLog) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._checkpoint_logs_soon)

    def _checkpoint_logs_soon(self) -> None:
        """Kafka writes a dir's recovery points and log starts right after a truncation (or
        a move between dirs); truncations close together share one write."""
        self._logs_changed = True
        if self._checkpoint_soon is None or self._checkpoint_soon.done():
            self._checkpoint_soon = asyncio.create_task(self._checkpoint_logs(),
                                                        name=f"checkpoint-logs-{self.node_id}")

    async def _checkpoint_logs(self) -> None:
        while self._logs_changed:  # one that came during a write is written after it
            self._logs_changed = False
            await self.checkpoint(self.recovery_points, self.log_starts)

    # -- background log work --------------------------------------------------------------
    def start(self) -> None:
        lag_s = self.config.get_int("replica.lag.time.max.ms") / 1000
        self._tasks.append(asyncio.create_task(self._every(lag_s / 2, self._shrink_isrs)))
        for key, file in (("replica.high.watermark.checkpoint.interval.ms", self.high_watermarks),
                          ("log.flush.offset.checkpoint.interval.ms", self.recovery_points),
                          ("log.flush.start.offset.checkpoint.interval.ms", self.log_starts)):
            self._tasks.append(asyncio.create_task(self._every(
                self.config.get_int(key) / 1000, functools.partial(self.checkpoint, file))))
        retention_s = self.config.get_int("log.retention.check.interval.ms") / 1000
        self._tasks.append(asyncio.create_task(self._every(retention_s, self._retention)))
        expiration_s = self.config.get_int("producer.id.expiration.check.interval.ms") / 1000
        self._tasks.append(asyncio.create_task(self._every(expiration_s,
                                                           self._expire_producers)))
        if self.config.get_bool("log.cleaner.enable"):
            backoff_s = self.config.get_int("log.cleaner.backoff.ms") / 1000
            self._tasks.append(asyncio.create_task(self._every(backoff_s, self._clean)))
        self._tasks.append(asyncio.create_task(self._every(1.0, self._flush_due)))

    async def _every(self, seconds: float, work: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                done = work()
                if inspect.isawaitable(done):
                    await done
            except Exception:
                log.exception("background log work %s failed", getattr(work, "__name__", work))

    # A KafkaStorageError takes that partition's dir offline; the other partitions go on.
    def _retention(self) -> None:
        for partition in list(self.partitions.values()):
            with contextlib.suppress(KafkaStorageError):
                deleted = partition.log.enforce_retention()
                if deleted:
                    log.info("retention deleted %d segment(s) of %s", deleted, partition.tp)

    def _expire_producers(self) -> None:
        """Every log, leader or follower, forgets its idle producers (Kafka's
        PeriodicProducerExpirationCheck, per log)."""
        for partition in list(self.partitions.values()):
            expired = partition.log.remove_expired_producers()
            if expired:
                log.debug("node %d: %s: %d producer id(s) expired", self.node_id, partition.tp,
                          expired)

    def _clean(self) -> None:
        for partition in list(self.partitions.values()):
            if "compact" in partition.log.config.cleanup_policy:
                with contextlib.suppress(KafkaStorageError):
                    partition.log.clean()

    def _flush_due(self) -> None:
        for partition in list(self.partitions.values()):
            with contextlib.suppress(KafkaStorageError):
                partition.log.flush_if_due()

    async def stop(self) -> None:
        for move in self.moves.values():  # unfinished moves are given up, as after a crash
            move.cancel()
        self.moves = {}
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        # A batch already on the worker thread finishes there; logs it opens are never
        # closed cleanly, so the next start recovers them, as after a crash.
        # Closing a log writes an epoch checkpoint still pending.
        tasks = [*self._tasks, *self._isr_changes,
                 *(t for t in (self._opener, self._epoch_writer, self._checkpoint_soon)
                   if t is not None)]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Nothing else uses the logs by now: close them (each a few fsyncs) off the loop,
        # which still serves the metadata quorum. One failing does not keep the others open.
        # Then, as Kafka's LogManager, each dir's checkpoints: the recovery points are the
        # log ends the closes flushed.
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(self._disk, p.log.close)
                               for p in self.partitions.values()), return_exceptions=True)
        await self.checkpoint()
        self._disk.shutdown(wait=False)
