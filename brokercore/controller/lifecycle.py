"""The active controller's side of broker lifecycle: registration, sessions, fencing, and
the partition changes brokers and operators ask for (AlterPartition, ElectLeaders,
reassignments). The decisions are `elections`' and `reassignment`'s pure functions; this
module keeps the one fact the image does not hold, each broker's last heartbeat, and runs
the active controller's timer loops (session expiry, auto leader rebalance).

Each `do_*` method runs on the active controller under `Controller`'s lock (it is one of
the controller's calls) and proposes what it decides.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from brokercore.config import BrokerConfig
from brokercore.protocol.errors import ErrorCode
from brokercore.topic_partition import TopicPartition

from . import elections, reassignment
from .elections import ElectionType, Rejected
from .errors import ControllerError
from .image import MetadataImage
from .quorum import MetadataQuorum
from .records import BrokerRecord, FenceBrokerRecord, MetadataRecord

log = logging.getLogger(__name__)

Serve = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, int]]]


@dataclass(frozen=True)
class HeartbeatResult:
    fenced: bool
    shutdown_ready: bool


def rejected(exc: Rejected) -> ControllerError:
    return ControllerError(exc.error_code, exc.message)


def tp_results(results: dict[TopicPartition, Rejected | None]) -> list[list[Any]]:
    """Per-partition results as JSON: `[topic, partition, error code or None, message]`."""
    return [[tp.topic, tp.partition, None if e is None else int(e.error_code),
             None if e is None else e.message] for tp, e in results.items()]


class BrokerLifecycle:
    def __init__(self, config: BrokerConfig, image: MetadataImage,
                 quorum: MetadataQuorum) -> None:
        self.config = config
        self.image = image
        self.quorum = quorum
        self.session_timeout = config.get_int("broker.session.timeout.ms") / 1000
        self.unclean_default = config.get_bool("unclean.leader.election.enable")
        self._last_heartbeat: dict[int, float] = {}

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
        return {
            "register_broker": self.do_register_broker,
            "heartbeat": self.do_heartbeat,
            "alter_partition": self.do_alter_partition,
            "elect_leaders": self.do_elect_leaders,
            "alter_partition_reassignments": self.do_alter_partition_reassignments,
            "fence_lapsed_sessions": self.do_fence_lapsed_sessions,
            "rebalance_leaders": self.do_rebalance_leaders,
        }

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def _propose(self, records: list[MetadataRecord]) -> None:
        if records:
            await self.quorum.propose(records)

    # -- the active controller's loops -------------------------------------------------------
    def take_over(self, serve: Serve) -> list[Coroutine[Any, Any, None]]:
        """A new active controller counts every broker as having just heartbeated."""
        now = self._now()
        self._last_heartbeat = dict.fromkeys(self.image.brokers, now)
        loops = [self._every(min(self.session_timeout / 4, 1.0), serve,
                             "fence_lapsed_sessions")]
        if self.config.get_bool("auto.leader.rebalance.enable"):
            interval = self.config.get_int("leader.imbalance.check.interval.seconds")
            loops.append(self._every(float(interval), serve, "rebalance_leaders"))
        return loops

    async def _every(self, interval: float, serve: Serve, method: str) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await serve(method, {})
            except ControllerError as exc:
                log.info("controller %s skipped: %s", method, exc.message)

    async def do_fence_lapsed_sessions(self, args: dict[str, Any]) -> None:
        deadline = self._now() - self.session_timeout
        for node_id, broker in sorted(self.image.brokers.items()):
            if not broker.fenced and self._last_heartbeat.get(node_id, 0.0) < deadline:
                log.warning("fencing broker %d: no heartbeat for %.1f s", node_id,
                            self.session_timeout)
                await self._propose(elections.records_fence_broker(
                    self.image, node_id, unclean_default=self.unclean_default))

    async def do_rebalance_leaders(self, args: dict[str, Any]) -> None:
        percentage = self.config.get_int("leader.imbalance.per.broker.percentage")
        moves = elections.preferred_elections(self.image, percentage)
        if moves:
            records, _ = elections.records_elect_leaders(self.image, ElectionType.PREFERRED,
                                                         moves)
            log.info("auto leader rebalance: %d partition(s) back to preferred", len(records))
            await self._propose(records)

    # -- brokers -------------------------------------------------------------------------
    async def do_register_broker(self, args: dict[str, Any]) -> int:
        node_id, incarnation = args["node_id"], args["incarnation"]
        current = self.image.brokers.get(node_id)
        if current is not None and current.incarnation == incarnation:
            return current.epoch  # a retried registration that did commit
        others_live = elections.live_brokers(self.image) - {node_id}
        if current is not None and not current.fenced and others_live:
            # A restart the session did not notice: what the old process led moves away
            # first, so its successor joins ISRs again only by catching up.
            await self._propose(elections.records_fence_broker(
                self.image, node_id, unclean_default=self.unclean_default))
        epoch = current.epoch + 1 if current else 0
        records: list[MetadataRecord] = [BrokerRecord(
            node_id, args["host"], args["port"], args["rack"], fenced=False, epoch=epoch,
            incarnation=incarnation,
            endpoints=tuple((n, h, p) for n, h, p in args.get("endpoints", [])))]
        records += elections.records_unfence_broker(self.image, node_id,
                                                    unclean_default=self.unclean_default)
        self._last_heartbeat[node_id] = self._now()
        await self._propose(records)
        log.info("registered broker %d, epoch %d", node_id, epoch)
        return epoch

    def heartbeat_at_once(self, args: dict[str, Any]) -> dict[str, bool] | None:
        """The answer to a heartbeat that changes nothing (a live broker at its current
        epoch, not leaving), given without the controller's lock; None: `do_heartbeat`
        decides, under the lock.

        Contact times must not wait behind a long call (creating a thousand topics holds
        the lock for many seconds): the session check that runs after it would fence
        every broker whose heartbeat was queued, and move the leaders of partitions that
        call never touched (KAFKA-17793 makes the same split)."""
        broker = self.image.brokers.get(args["node_id"])
        if (broker is None or broker.fenced or broker.epoch != args["broker_epoch"]
                or args["want_shutdown"] or self._offline_records(args)):
            return None
        self._last_heartbeat[broker.node_id] = self._now()
        return {"fenced": False, "shutdown_ready": False}

    async def do_heartbeat(self, args: dict[str, Any]) -> dict[str, bool]:
        node_id, epoch = args["node_id"], args["broker_epoch"]
        broker = self.image.brokers.get(node_id)
        if broker is None:
            raise ControllerError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                                  f"Broker {node_id} is not registered.")
        if broker.epoch != epoch:
            raise ControllerError(ErrorCode.STALE_BROKER_EPOCH,
                                  f"Broker {node_id}'s epoch is {broker.epoch}, not {epoch}.")
        self._last_heartbeat[node_id] = self._now()
        offline = self._offline_records(args)
        if offline:
            log.warning("broker %d reports %d replica(s) on failed log dirs; moving %d "
                        "leadership/ISR change(s) off it", node_id,
                        len(args["offline_replicas"]), len(offline))
            await self._propose(offline)
        if args["want_shutdown"]:
            await self._propose(elections.records_controlled_shutdown(
                self.image, node_id, unclean_default=self.unclean_default))
            leads = any(p.leader == node_id for _, _, p in elections.partitions(self.image))
            return {"fenced": True, "shutdown_ready": not leads}
        if broker.fenced:
            log.info("unfencing broker %d", node_id)
            leaders = elections.records_unfence_broker(self.image, node_id,
                                                       unclean_default=self.unclean_default)
            await self._propose(
                [FenceBrokerRecord(node_id, False), *leaders])
        return {"fenced": self.image.brokers[node_id].fenced, "shutdown_ready": False}

    def _offline_records(self, args: dict[str, Any]) -> list[MetadataRecord]:
        """The changes a heartbeat's offline replicas call for; none once they are made."""
        offline = {TopicPartition(t, p) for t, p in args.get("offline_replicas", [])}
        if not offline:
            return []
        return elections.records_offline_replicas(self.image, args["node_id"], offline,
                                                  unclean_default=self.unclean_default)

    # -- partitions ----------------------------------------------------------------------
    async def do_alter_partition(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            records = elections.records_alter_partition(
                self.image, args["topic_id"], args["partition"], args["leader_id"],
                args["leader_epoch"], args["partition_epoch"], list(args["isr"]))
        except Rejected as exc:
            raise rejected(exc) from None
        await self._propose(records)
        part = self.image.topics_by_id[args["topic_id"]].partitions[args["partition"]]
        return {"replicas": part.replicas, "isr": part.isr, "leader": part.leader,
                "leader_epoch": part.leader_epoch, "partition_epoch": part.partition_epoch,
                "adding_replicas": part.adding_replicas,
                "removing_replicas": part.removing_replicas}

    async def do_elect_leaders(self, args: dict[str, Any]) -> list[list[Any]]:
        tps = _tps(args["partitions"])
        records, results = elections.records_elect_leaders(
            self.image, ElectionType(args["election_type"]), tps)
        await self._propose(records)
        return tp_results(results)

    async def do_alter_partition_reassignments(self, args: dict[str, Any]) -> list[list[Any]]:
        changes = {TopicPartition(t, p): target for t, p, target in args["changes"]}
        records, results = reassignment.records_alter_partition_reassignments(
            self.image, changes)
        await self._propose(records)
        return tp_results(results)


def _tps(raw: list[list[Any]] | None) -> list[TopicPartition] | None:
    return None if raw is None else [TopicPartition(t, p) for t, p in raw]
