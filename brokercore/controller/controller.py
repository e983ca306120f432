"""The controller: decides metadata changes and writes them as records.

Every change goes through one public method here, the same on every node. It becomes one
call (a method name and JSON arguments) that `MetadataQuorum.call` runs on the active
controller: here, or forwarded over the controller listener. There, under one lock, a
`_do_*` method validates the call against the image, builds records and proposes them to
the Raft quorum. Records change the image only in `_apply`, on every node, once committed;
then the listeners (the broker's replica manager) learn of each one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, astuple
from pathlib import Path
from typing import Any

from brokercore.config import BrokerConfig
from brokercore.protocol.errors import ErrorCode
from brokercore.security.acls import AclBinding, AclError, AclFilter, new_acl, new_filter
from brokercore.topic_partition import TopicPartition

from .configs import broker_config_records, group_config_records, topic_config_records
from .elections import ElectionType
from .errors import ControllerError as ControllerError  # handlers import it from here
from .image import MetadataImage, PartitionRegistration, Record, acl_record
from .lifecycle import BrokerLifecycle, HeartbeatResult
from .quorum import MetadataQuorum, QuorumState, VoterState
from .raft import Role
from .raft_snapshots import Snapshot
from .reassignment import Reassignment, list_partition_reassignments
from .records import (
    ClusterRecord,
    MetadataRecord,
    ProducerIdsRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    from_json,
    to_json,
)
from .scram import UserResult, read_bootstrap, scram_credential_records
from .topics import INTERNAL_TOPICS as INTERNAL_TOPICS  # handlers import these from here
from .topics import NewTopic as NewTopic
from .topics import TopicDecisions
from .topics import validate_topic_name as validate_topic_name

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000
# CreateTopics' records per proposal: a thousand partitions are applied in one go, as one
# topic of a thousand partitions always was. Kafka's bound on one operation is 10,000.
MAX_RECORDS_PER_PROPOSAL = 1000



Listener = Callable[[MetadataRecord], None]
Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Controller:
    def __init__(self, config: BrokerConfig, metadata_dir: Path) -> None:
        self.config = config
        self.image = MetadataImage()
        # The broker's dynamic configs are the image's: replayed records change them.
        config.dynamic = self.image.broker_configs
        self.listeners: list[Listener] = []
        # Told when the image was replaced by the leader's snapshot (this node fell behind
        # the leader's log start while running); records in between are never seen.
        self.snapshot_listeners: list[Callable[[], None]] = []
        self.quorum = MetadataQuorum(config, metadata_dir, self._apply, self._serve,
                                     self._restore, self._snapshot_records)
        self.quorum.on_role_change = self._on_role_change
        self._replaying = True  # until start(): rebuild the image, tell no listener
        self._lock = asyncio.Lock()
        self._leader_tasks: list[asyncio.Task[None]] = []
        self._next_producer_id = self._producer_id_block_end = 0
        self._handlers: dict[str, Handler] = {
            "create_topics": self._do_create_topics,
            "delete_topic": self._do_delete_topic,
            "create_partitions": self._do_create_partitions,
            "alter_topic_configs": self._do_alter_topic_configs,
            "alter_broker_configs": self._do_alter_broker_configs,
            "alter_group_configs": self._do_alter_group_configs,
            "allocate_producer_ids": self._do_allocate_producer_ids,
            "write_cluster_id": self._do_write_cluster_id,
            "alter_scram_credentials": self._do_alter_scram_credentials,
            "describe_quorum": self._do_describe_quorum,
            "create_acls": self._do_create_acls,
            "delete_acls": self._do_delete_acls,
        }
        self.topics = TopicDecisions(config, self.image)
        self.lifecycle = BrokerLifecycle(config, self.image, self.quorum)
        self._handlers.update(self.lifecycle.handlers())

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def active_controller_id(self) -> int:
        """The Raft leader, -1 while there is none."""
        return self.quorum.active_controller_id

    @property
    def log_end_offset(self) -> int:
        return self.quorum.raft.end_offset if self.quorum.raft is not None else 0

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Join the quorum and return once this node's image has caught up with it.

        Records replayed until then rebuild the image only; the listeners start from the
        caught-up image (the replica manager's `load`), as a topic deleted and re-created
        under the same name must not touch the new topic's logs on the way.
        """
        await self.quorum.start()
        await self.quorum.wait_until(lambda: self.quorum.caught_up
                                     and self.image.cluster_id is not None)
        self._replaying = False

    async def stop(self) -> None:
        for task in self._leader_tasks:
            task.cancel()
        await self.quorum.stop()

    def _apply(self, offset: int, raw: Record) -> None:
        record = from_json(raw)
        self.image.apply(record, offset)
        if not self._replaying:
            for listener in self.listeners:
                listener(record)

    def _restore(self, snapshot: Snapshot) -> None:
        self.image.load([from_json(raw) for raw in snapshot.records], snapshot.end_offset - 1)
        log.info("node %d: metadata image loaded from the snapshot at offset %d",
                 self.node_id, snapshot.end_offset)
        if not self._replaying:
            for listener in self.snapshot_listeners:
                listener()

    def _snapshot_records(self) -> list[Record]:
        return [to_json(record) for record in self.image.records()]

    def _on_role_change(self, role: Role, leader_id: int | None) -> None:
        for task in self._leader_tasks:
            task.cancel()
        self._leader_tasks = []
        if role is Role.LEADER:
            self._leader_tasks.append(asyncio.ensure_future(self._take_over()))

    async def _take_over(self) -> None:
        """The new active controller's first writes, once its image has caught up."""
        await self.quorum.wait_until(lambda: self.quorum.is_active)
        log.info("node %d: active controller", self.node_id)
        if self.image.cluster_id is None:
            cluster_id = self.config.get("cluster.id") or _random_cluster_id()
            with contextlib.suppress(ControllerError):
                await self._serve("write_cluster_id", {"cluster_id": cluster_id})
        self._leader_tasks += [asyncio.create_task(loop)
                               for loop in self.lifecycle.take_over(self._serve)]

    async def _serve(self, method: str, args: dict[str, Any]) -> tuple[Any, int]:
        """Run one call on the active controller: validate and propose under the lock.

        A heartbeat that changes nothing is answered without it (`heartbeat_at_once`)."""
        handler = self._handlers.get(method)
        if handler is None:
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"Unknown controller call {method!r}")
        if method == "heartbeat" and self.quorum.is_active:
            answer = self.lifecycle.heartbeat_at_once(args)
            if answer is not None:  # keeps a session; waits for no other call
                return answer, self.quorum.applied_offset
        async with self._lock:
            if not self.quorum.is_active:
                raise ControllerError(ErrorCode.NOT_CONTROLLER,
                                      "This is not the active controller.")
            result = await handler(args)
        return result, self.quorum.applied_offset

    async def _do_write_cluster_id(self, args: dict[str, Any]) -> None:
        """A new cluster's first records: its id, then the bootstrap records (the first
        SCRAM users) of this node's metadata log dir, never again once the id exists."""
        if self.image.cluster_id is None:
            bootstrap = read_bootstrap(self.config.metadata_log_dir)
            if bootstrap:
                log.info("node %d: writing %d bootstrap record(s)", self.node_id,
                         len(bootstrap))
            await self.quorum.propose([ClusterRecord(args["cluster_id"]), *bootstrap])

    # -- the quorum -----------------------------------------------------------------------
    async def describe_quorum(self) -> QuorumState:
        """Leader, epoch, high watermark and voters' progress, from the active controller."""
        answer = await self.quorum.call("describe_quorum", {})
        return QuorumState(answer["leader_id"], answer["leader_epoch"],
                           answer["high_watermark"],
                           [VoterState(*voter) for voter in answer["voters"]])

    def voter_addresses(self) -> dict[int, tuple[str, int]]:
        """Each voter's controller listener (host, port), as this node knows them."""
        return dict(self.quorum.transport.voters)

    async def _do_describe_quorum(self, args: dict[str, Any]) -> dict[str, Any]:
        state = self.quorum.describe()
        return {"leader_id": state.leader_id, "leader_epoch": state.leader_epoch,
                "high_watermark": state.high_watermark,
                "voters": [astuple(v) for v in state.voters]}

    # -- brokers --------------------------------------------------------------------------
    async def register_broker(self, node_id: int, host: str, port: int,
                              rack: str | None = None, incarnation: str | None = None,
                              endpoints: Iterable[tuple[str, str, int]] = ()) -> int:
        """Register (or re-register) a broker, unfenced; its new broker epoch. host and port
        are its inter-broker listener's, `endpoints` every advertised listener's."""
        epoch: int = await self.quorum.call("register_broker", {
            "node_id": node_id, "host": host, "port": port, "rack": rack,
            "incarnation": incarnation or str(uuid.uuid4()),
            "endpoints": [list(e) for e in endpoints]})
        return epoch

    async def heartbeat(self, node_id: int, broker_epoch: int, *, want_shutdown: bool = False,
                        offline_replicas: Iterable[TopicPartition] = ()) -> HeartbeatResult:
        """Keep the broker's session; STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED tell it
        to register again. `offline_replicas` are the broker's replicas on failed log dirs
        (KIP-858's OfflineLogDirs, by partition): the controller moves them out of ISRs and
        their leaderships elsewhere."""
        answer = await self.quorum.call("heartbeat", {
            "node_id": node_id, "broker_epoch": broker_epoch, "want_shutdown": want_shutdown,
            "offline_replicas": [[tp.topic, tp.partition] for tp in offline_replicas]})
        return HeartbeatResult(answer["fenced"], answer["shutdown_ready"])

    # -- partitions -----------------------------------------------------------------------
    async def alter_partition(self, topic_id: str, partition: int, leader_id: int,
                              leader_epoch: int, partition_epoch: int,
                              isr: list[int]) -> PartitionRegistration:
        """A leader's ISR change (KIP-497), checked against the epochs it knew."""
        answer = await self.quorum.call("alter_partition", {
            "topic_id": topic_id, "partition": partition, "leader_id": leader_id,
            "leader_epoch": leader_epoch, "partition_epoch": partition_epoch, "isr": isr})
        return PartitionRegistration(**answer)

    async def elect_leaders(
        self, election_type: int, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, ControllerError | None]:
        """0 preferred, 1 unclean; None elects wherever an election is needed."""
        if election_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
            raise ControllerError(ErrorCode.INVALID_REQUEST,
                                  f"Unknown election type {election_type}.")
        answer = await self.quorum.call("elect_leaders", {
            "election_type": int(election_type),
            "partitions": None if partitions is None
            else [[tp.topic, tp.partition] for tp in partitions]})
        return _tp_results(answer)

    async def alter_partition_reassignments(
        self, changes: dict[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, ControllerError | None]:
        """Start (target replicas) or cancel (None) reassignments."""
        answer = await self.quorum.call("alter_partition_reassignments", {
            "changes": [[tp.topic, tp.partition, target] for tp, target in changes.items()]})
        return _tp_results(answer)

    async def list_partition_reassignments(
        self, partitions: list[TopicPartition] | None = None
    ) -> dict[TopicPartition, Reassignment]:
        """Reassignments in progress, read off this node's caught-up image."""
        return list_partition_reassignments(self.image, partitions)

    # -- topics ---------------------------------------------------------------------------
    async def create_topics(
        self, topics: list[NewTopic], *, validate_only: bool = False
    ) -> list[tuple[NewTopic, ControllerError | None]]:
        answers = await self.quorum.call("create_topics", {
            "topics": [asdict(t) for t in topics], "validate_only": validate_only})
        results: list[tuple[NewTopic, ControllerError | None]] = []
        for topic, answer in zip(topics, answers, strict=True):
            filled = answer["topic"]  # the counts and configs the controller settled on
            topic.num_partitions = filled["num_partitions"]
            topic.replication_factor = filled["replication_factor"]
            topic.configs = filled["configs"]
            error = answer["error"]
            results.append((topic, None if error is None
                            else ControllerError.from_wire(error[0], error[1])))
        return results

    async def _do_create_topics(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        """Whole topics, as many as fit, go in each proposal (one Raft round trip and one
        fsync per voter for many topics, not one per topic); a topic that alone is bigger
        than `MAX_RECORDS_PER_PROPOSAL` is a proposal of its own."""
        answers, accepted = [], set()
        batch: list[MetadataRecord] = []
        batched: list[NewTopic] = []
        proposing = not args["validate_only"]
        for raw in args["topics"]:
            topic = NewTopic(raw["name"], raw["num_partitions"], raw["replication_factor"],
                             {int(p): r for p, r in raw["assignments"].items()},
                             raw["configs"])
            error = None
            try:
                if topic.name in accepted:  # perhaps not in the image yet
                    raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                          f"Topic '{topic.name}' already exists.")
                records = self.topics.topic_records(topic)
            except ControllerError as exc:
                error = [int(exc.error_code), exc.message]
            else:
                accepted.add(topic.name)
                if proposing and batch and len(batch) + len(records) > MAX_RECORDS_PER_PROPOSAL:
                    await self._propose_topics(batch, batched)
                    batch, batched = [], []
                batch += records
                batched.append(topic)
            answers.append({"topic": asdict(topic), "error": error})
        if proposing and batch:
            await self._propose_topics(batch, batched)
        return answers

    async def _propose_topics(self, records: list[MetadataRecord], topics: list[NewTopic],
                              ) -> None:
        await self.quorum.propose(records)
        for topic in topics:
            log.info("created topic %s with %d partitions", topic.name, topic.num_partitions)

    async def delete_topic(self, name: str) -> None:
        await self.quorum.call("delete_topic", {"name": name})

    async def _do_delete_topic(self, args: dict[str, Any]) -> None:
        name = args["name"]
        topic = self.image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  "This server does not host this topic-partition.")
        if not self.config.get_bool("delete.topic.enable"):
            raise ControllerError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        await self.quorum.propose([RemoveTopicRecord(topic.topic_id, name)])
        log.info("deleted topic %s", name)

    async def create_partitions(
        self, name: str, count: int, *, validate_only: bool,
        assignments: list[list[int]] | None = None,
    ) -> None:
        """Grow a topic to `count` partitions, placed by us or by `assignments` (new ones only)."""
        await self.quorum.call("create_partitions", {
            "name": name, "count": count, "validate_only": validate_only,
            "assignments": assignments})

    async def _do_create_partitions(self, args: dict[str, Any]) -> None:
        name, count, assignments = args["name"], args["count"], args["assignments"]
        topic = self.image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if count <= current:
            raise ControllerError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested "
                f"{count}." if count < current else f"Topic already has {current} partitions.",
            )
        rf = len(topic.partitions[0].replicas)
        if assignments is None:
            placed = self.topics.assign(NewTopic(name, count - current, rf),
                                        first_partition=current)
        else:
            placed = self.topics.manual_new_partitions(current, count, assignments, rf)
        if not args["validate_only"]:
            await self.quorum.propose([self.topics.partition_record(topic.topic_id, p, r)
                                       for p, r in sorted(placed.items())])

    # -- producer ids ---------------------------------------------------------------------
    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before, even across restarts.

        Each broker hands out ids from its own block, recorded in the metadata log by the
        active controller (KRaft's AllocateProducerIds), so a restart skips the rest of the
        block instead of reusing ids.
        """
        if self._next_producer_id >= self._producer_id_block_end:
            start: int = await self.quorum.call("allocate_producer_ids", {})
            if self._next_producer_id >= self._producer_id_block_end:  # no racing call won
                self._next_producer_id = start
                self._producer_id_block_end = start + PRODUCER_ID_BLOCK
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    async def _do_allocate_producer_ids(self, args: dict[str, Any]) -> int:
        start = self.image.producer_id_block_end
        await self.quorum.propose([ProducerIdsRecord(start + PRODUCER_ID_BLOCK)])
        return start

    # -- configs --------------------------------------------------------------------------
    async def alter_topic_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool
    ) -> None:
        """Set (or with None, delete) topic config overrides."""
        await self.quorum.call("alter_topic_configs", {
            "name": name, "changes": changes, "validate_only": validate_only})

    async def _do_alter_topic_configs(self, args: dict[str, Any]) -> None:
        records = topic_config_records(self.image, args["name"], args["changes"])
        if not args["validate_only"]:
            await self.quorum.propose(list(records))

    async def alter_broker_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool
    ) -> None:
        """Set (or with None, delete) dynamic broker configs: "" for the cluster-wide
        default, a node id for one broker."""
        await self.quorum.call("alter_broker_configs", {
            "name": name, "changes": changes, "validate_only": validate_only})

    async def _do_alter_broker_configs(self, args: dict[str, Any]) -> None:
        records = broker_config_records(args["name"], args["changes"])
        if records and not args["validate_only"]:
            await self.quorum.propose(list(records))

    async def alter_group_configs(
        self, name: str, changes: dict[str, str | None], *, validate_only: bool
    ) -> None:
        """Set (or with None, delete) a consumer group's configs (KIP-848)."""
        await self.quorum.call("alter_group_configs", {
            "name": name, "changes": changes, "validate_only": validate_only})

    async def _do_alter_group_configs(self, args: dict[str, Any]) -> None:
        records = group_config_records(args["name"], args["changes"])
        if records and not args["validate_only"]:
            await self.quorum.propose(list(records))

    # -- ACLs -----------------------------------------------------------------------------
    async def create_acls(self, acls: list[AclBinding]) -> list[ControllerError | None]:
        """Create ACLs (one already there is kept as it is); an error per ACL."""
        answers = await self.quorum.call("create_acls", {
            "acls": [_acl_fields(acl) for acl in acls]})
        return [None if answer is None else ControllerError.from_wire(*answer)
                for answer in answers]

    async def _do_create_acls(self, args: dict[str, Any]) -> list[list[Any] | None]:
        answers: list[list[Any] | None] = []
        records = []
        seen: set[AclBinding] = set()
        for fields in args["acls"]:
            try:
                acl = new_acl(*fields)
            except AclError as exc:
                answers.append([int(ErrorCode.INVALID_REQUEST), str(exc)])
                continue
            answers.append(None)
            if acl not in seen and self.image.acls.id_of(acl) is None:
                seen.add(acl)
                records.append(acl_record(str(uuid.uuid4()), acl))
        if records:
            await self.quorum.propose(list(records))
        return answers

    async def delete_acls(self, filters: list[AclFilter]
                          ) -> list[list[AclBinding] | ControllerError]:
        """Delete the ACLs each filter selects; per filter, the ACLs it deleted (an ACL two
        filters select is reported by the first), or its error."""
        answers = await self.quorum.call("delete_acls", {
            "filters": [_acl_fields(f) for f in filters]})
        return [ControllerError.from_wire(*answer["error"]) if answer["error"] is not None
                else [new_acl(*fields) for fields in answer["acls"]] for answer in answers]

    async def _do_delete_acls(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []
        deleted: set[str] = set()
        for fields in args["filters"]:
            try:
                acl_filter = new_filter(*fields)
            except AclError as exc:
                answers.append({"error": [int(ErrorCode.INVALID_REQUEST), str(exc)],
                                "acls": []})
                continue
            matched = [(acl_id, acl) for acl_id, acl in self.image.acls.matching(acl_filter)
                       if acl_id not in deleted]
            deleted.update(acl_id for acl_id, _ in matched)
            answers.append({"error": None, "acls": [_acl_fields(acl) for _, acl in matched]})
        if deleted:
            await self.quorum.propose([RemoveAccessControlEntryRecord(acl_id)
                                       for acl_id in sorted(deleted)])
        return answers


    # -- SCRAM credentials ----------------------------------------------------------------
    async def alter_scram_credentials(
        self, deletions: list[tuple[str, int]], upsertions: list[dict[str, Any]]
    ) -> list[UserResult]:
        """Remove (user, mechanism) credentials and add or replace others (the fields of a
        UserScramCredentialRecord); each user's (name, error code, message)."""
        answer = await self.quorum.call("alter_scram_credentials", {
            "deletions": [list(d) for d in deletions], "upsertions": upsertions})
        return [(name, code, message) for name, code, message in answer]

    async def _do_alter_scram_credentials(self, args: dict[str, Any]) -> list[UserResult]:
        records, results = scram_credential_records(self.image, args["deletions"],
                                                    args["upsertions"])
        if records:
            await self.quorum.propose(records)
        return results


def _acl_fields(acl: AclBinding | AclFilter) -> list[Any]:
    return [int(acl.resource_type), acl.resource_name, int(acl.pattern_type), acl.principal,
            acl.host, int(acl.operation), int(acl.permission)]


def _tp_results(answer: list[list[Any]]) -> dict[TopicPartition, ControllerError | None]:
    return {TopicPartition(topic, partition): None if code is None
            else ControllerError.from_wire(code, message)
            for topic, partition, code, message in answer}


def _random_cluster_id() -> str:
    """A Kafka-style cluster id: a UUID in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
