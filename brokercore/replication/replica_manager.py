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
creating logs and deleting removed ones, goes to the disk threads (`LogOpener`); each
opened log is installed back on the loop with the role the image gives it by then. So do
new leaderships' epoch checkpoints (`EpochCheckpoints`) and the log dirs' checkpoint files
(`LogDirCheckpoints`). The periodic work is `housekeeping.py`'s, the topics' configs
`TopicConfigs`'. What stays here: the replicas hosted and where, their roles, the ISR,
the fetchers, and the log dirs that fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from brokercore.clock import Clock
from brokercore.config import BrokerConfig
from brokercore.controller.image import MetadataImage, PartitionRegistration
from brokercore.controller.records import (
    BrokerRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
)
from brokercore.log import KafkaStorageError, PartitionLog
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from .checkpoint import LogDirCheckpoints
from .epoch_checkpoints import EpochCheckpoints
from .fetcher import ReplicaFetcher
from .housekeeping import every, start_housekeeping
from .isr import IsrChanges
from .log_dirs import LogDir, delete_strays, locate_partitions
from .log_mover import ReplicaMove, recover_moves
from .log_opener import OPEN_BATCH, LogOpener, Opened, Opening
from .partition import Partition, PartitionError
from .topic_configs import TopicConfigs

log = logging.getLogger(__name__)

# Several threads, as most of the work is waiting on fsyncs, which the file system commits
# together.
DISK_THREADS = 8


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
        self.isr = IsrChanges(self.node_id)  # the broker sets isr.alter_partition
        self._tasks: list[asyncio.Task[None]] = []
        self.topic_configs = TopicConfigs(config, image)
        self._disk = ThreadPoolExecutor(DISK_THREADS, thread_name_prefix=f"logs-{self.node_id}")
        self.placement: dict[TopicPartition, LogDir] = {}  # the dir of each hosted partition
        # Each dir's checkpoint files (`checkpoint.py`), written on the disk threads.
        self.checkpoints = LogDirCheckpoints(self.node_id, log_dirs, self.partitions,
                                             self.placement, self._disk, self._fail_dir)
        self.opener = LogOpener(self.node_id, clock, self._disk, self._plan_opening,
                                self._opened, self.watch)
        # New leaderships whose epoch checkpoint is still to be written, off the loop.
        self.epoch_checkpoints = EpochCheckpoints(self.node_id, self.partitions, self._disk,
                                                  OPEN_BATCH)
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
        self.checkpoints.read()
        recover_moves(self.log_dirs)
        self._found = locate_partitions(self.log_dirs)
        for topic in self.image.topics.values():
            for index in topic.partitions:
                self._sync_partition(topic.name, index, new=False)
        await self.settled()
        delete_strays(self._found)
        self._found = {}
        await self.checkpoints.upgrade()

    async def settled(self, within: float | None = None) -> bool:
        """Wait until every log assigned or removed so far is open or deleted; False if
        that took longer than `within` seconds (the work goes on)."""
        return await self.opener.settled(within)

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
        config = self.topic_configs.log_config(topic_name)
        min_isr = self.topic_configs.min_insync_replicas(topic_name)
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
        partition.min_insync_replicas = self.topic_configs.min_insync_replicas(tp.topic)
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
                self.epoch_checkpoints.persist_later(partition)
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
        self.epoch_checkpoints.forget(tp)
        self.placement.pop(tp, None)
        move = self.moves.pop(tp, None)
        if move is not None:
            move.cancel()
        partition = self.partitions.pop(tp)
        partition.become_follower(-1, partition.leader_epoch, partition.partition_epoch, [], [])
        self._loop = asyncio.get_running_loop()
        self.opener.delete_later(partition.log)

    # -- opening logs off the loop -----------------------------------------------------------
    def _open_later(self, tp: TopicPartition, new: bool) -> None:
        self._loop = asyncio.get_running_loop()  # for the logs' hooks, called on any thread
        self.opener.open_later(tp, new)

    def _plan_opening(self, tp: TopicPartition, new: bool) -> Opening | None:
        registration = self._wanted(tp, None)
        if registration is None or tp in self.partitions or tp in self.offline:
            return None
        log_dir = self._choose_dir(tp, new)
        if log_dir is None:
            return None
        self.placement[tp] = log_dir  # reserved now, so a batch spreads over the dirs
        lead = registration.leader_epoch if registration.leader == self.node_id else None
        topic_id = self.image.topics[tp.topic].topic_id
        return Opening(tp, topic_id, self.topic_configs.log_config(tp.topic), lead, log_dir,
                       self.checkpoints.recovery_points.lookup(tp, log_dir.path),
                       self.checkpoints.log_starts.lookup(tp, log_dir.path))

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

    def _opened(self, opening: Opening, plog: Opened) -> None:
        if isinstance(plog, OSError):  # the dir failed: it goes offline, and the log
            self._fail_dir(opening.log_dir, str(plog))
        if not isinstance(plog, PartitionLog):
            self.placement.pop(opening.tp, None)
            return
        try:
            self._install(opening, plog)
        except Exception:  # a bug, or its epoch checkpoint failed: not hosted
            log.exception("node %d: cannot host %s", self.node_id, opening.tp)

    def _install(self, opening: Opening, plog: PartitionLog) -> None:
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
            self.opener.delete_later(plog)
            return
        config = self.topic_configs.log_config(tp.topic)
        if config != opening.config:  # a config record came meanwhile
            plog.update_config(config)
        partition = Partition(tp, opening.topic_id, plog, self.node_id,
                              self.checkpoints.high_watermarks.lookup(tp, opening.log_dir.path)
                              or 0)
        self.partitions[tp] = partition
        self._take_role(partition, registration)

    # -- log dirs failing while the broker runs (KIP-112) -------------------------------------
    def watch(self, plog: PartitionLog) -> None:
        """Hear of the log's I/O errors and truncations (any thread)."""
        plog.on_failure = self._log_failed
        plog.on_truncated = self._log_truncated

    def _log_failed(self, plog: PartitionLog, error: OSError) -> None:
        """A log met an I/O error (on the loop or a disk thread): its dir goes offline."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._fail_dir_of, plog.directory, str(error))

    def _log_truncated(self, plog: PartitionLog) -> None:
        """A truncation lowered the log's recovery point: its dir's checkpoints are due."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.checkpoints.write_logs_soon)

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
                self.checkpoints.write_logs_soon()

    def _stop_fetching(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

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
                self.isr.propose(partition, [*partition.isr, replica_id])
        return True

    def _shrink_isrs(self) -> None:
        self.isr.shrink(list(self.partitions.values()), self.clock.time_ms(),
                        self.config.get_int("replica.lag.time.max.ms"))

    # -- background work --------------------------------------------------------------------
    def start(self) -> None:
        lag_s = self.config.get_int("replica.lag.time.max.ms") / 1000
        self._tasks.append(asyncio.create_task(every(lag_s / 2, self._shrink_isrs)))
        self._tasks += start_housekeeping(self.config, self.partitions, self.checkpoints)

    async def stop(self) -> None:
        for move in self.moves.values():  # unfinished moves are given up, as after a crash
            move.cancel()
        self.moves = {}
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        # A batch already on the worker thread finishes there; logs it opens are never
        # closed cleanly, so the next start recovers them, as after a crash.
        # Closing a log writes an epoch checkpoint still pending.
        tasks = [*self._tasks, *self.isr.in_flight,
                 *(t for t in (self.opener.task, self.epoch_checkpoints.writer,
                               self.checkpoints.soon) if t is not None)]
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
        await self.checkpoints.write()
        self._disk.shutdown(wait=False)
