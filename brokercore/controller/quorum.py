"""This process's member of the metadata quorum, and the way to the active controller.

`MetadataQuorum` owns the `RaftNode` (storage in `<log dir>/__cluster_metadata-0/`), the
controller listener and the connections to other voters. `call(method, args)` runs a
controller call where it must run: here when this node is the active controller (the Raft
leader, caught up on its own term), otherwise on the active controller over the listener.
It retries on NOT_CONTROLLER and lost connections until
`controller.quorum.request.timeout.ms`, then waits until this node has applied the offset
the answer names, so a caller always sees its own change.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokercore.config import BrokerConfig, ConfigError, parse_listeners
from brokercore.protocol.errors import ErrorCode
from brokercore.security.connection import controller_security

from .errors import ControllerError
from .image import Record
from .listener import Address, ControllerServer, RpcClient, TcpTransport
from .raft import ApplyHook, NotLeaderError, RaftConfig, RaftNode, RestoreHook, Role, RoleHook
from .raft_snapshots import SnapshotPolicy
from .raft_storage import Entry, FileRaftStorage
from .raft_transport import AsyncioScheduler
from .records import MetadataRecord, to_json

log = logging.getLogger(__name__)

LocalHandler = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, int]]]
RETRY_BACKOFF = 0.05


def parse_voters(value: str) -> dict[int, Address]:
    """`controller.quorum.voters`: `1@host:port,2@host:port,...`."""
    voters: dict[int, Address] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        node, _, address = item.partition("@")
        host, _, port = address.rpartition(":")
        try:
            voters[int(node)] = (host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError(f"Invalid controller.quorum.voters entry {item!r}: expected "
                              "ID@host:port") from None
    return voters


def controller_listener(config: BrokerConfig) -> Address | None:
    """The address this node serves the controller listener on, if it has one."""
    voters = parse_voters(config.get("controller.quorum.voters") or "")
    if not voters:
        return None
    names = {n.strip() for n in (config.get("controller.listener.names") or "").split(",")}
    for listener in parse_listeners(config.get("listeners") or ""):
        if listener.name in names:
            return listener.host, listener.port
    if config.node_id in voters:
        return voters[config.node_id]
    return None


@dataclass(frozen=True)
class VoterState:
    """One voter's replication of the metadata log, as DescribeQuorum reports it.

    `last_caught_up_ms` is when it last answered while holding the leader's whole log; -1
    while it lags (the leader keeps no older time)."""

    node_id: int
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


@dataclass(frozen=True)
class QuorumState:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[VoterState]


class MetadataQuorum:
    def __init__(self, config: BrokerConfig, directory: Path, apply: ApplyHook,
                 local: LocalHandler, restore: RestoreHook,
                 snapshot_records: Callable[[], list[Record]]) -> None:
        self.config = config
        self.node_id = config.node_id
        self.directory = directory
        self.apply_hook = apply
        self.local = local
        self.restore_hook = restore
        self.snapshot_records = snapshot_records
        self.snapshots = SnapshotPolicy(
            config.get_int("metadata.log.max.record.bytes.between.snapshots"),
            config.get_int("metadata.log.max.snapshot.interval.ms") / 1000, time.monotonic)
        self._snapshot_timer: asyncio.Task[None] | None = None
        self.on_role_change: RoleHook | None = None
        # Told of an I/O error in the metadata log (the broker shuts down).
        self.on_storage_failure: Callable[[OSError], None] | None = None
        self.voters = parse_voters(config.get("controller.quorum.voters") or "")
        if self.voters and self.node_id not in self.voters:
            raise ConfigError(f"node.id {self.node_id} is not in controller.quorum.voters; "
                              "broker-only nodes are not supported")
        self.request_timeout = config.get_int("controller.quorum.request.timeout.ms") / 1000
        self.raft: RaftNode | None = None
        self.server: ControllerServer | None = None
        addresses: dict[int, Address] = dict(self.voters)
        self.security, client = controller_security(config)
        self.transport = TcpTransport(self.node_id, addresses, client)
        self.rpc = RpcClient(addresses, client)
        self._apply_waiters: list[tuple[int, asyncio.Future[None]]] = []

    # -- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Open the controller listener and join the quorum (a lone voter leads at once)."""
        address = controller_listener(self.config)
        if address is not None:
            self.server = ControllerServer(address[0], address[1], self.transport, self.local,
                                           self.security)
            port = await self.server.start()
            self.transport.voters[self.node_id] = (address[0], port)
        migrate_single_node_log(self.directory)
        election = self.config.get_int("controller.quorum.election.timeout.ms") / 1000
        storage = FileRaftStorage(self.directory)
        storage.on_failure = self._storage_failed
        raft = RaftNode(
            self.node_id, set(self.voters) or {self.node_id}, storage,
            self.transport, AsyncioScheduler(), apply=self._apply, restore=self.restore_hook,
            config=RaftConfig(election_timeout=election, heartbeat_interval=election / 10),
        )
        self.raft = raft
        raft.on_applied = self._on_applied
        raft.on_role_change = self.on_role_change
        if raft.role is Role.LEADER and self.on_role_change is not None:
            self.on_role_change(raft.role, raft.leader_id)  # a lone voter led in __init__
        self._snapshot_timer = asyncio.create_task(self._snapshot_when_due())

    def _storage_failed(self, error: OSError) -> None:
        if self.on_storage_failure is not None:
            self.on_storage_failure(error)

    def _apply(self, offset: int, record: Record) -> None:
        self.snapshots.applied(record)
        self.apply_hook(offset, record)

    def _maybe_snapshot(self) -> None:
        """Snapshot the image at the applied offset if the policy says it is time."""
        if self.raft is None or not self.snapshots.due():
            return
        try:
            self.raft.take_snapshot(self.snapshot_records())
        except OSError:
            log.exception("node %d: cannot write a metadata snapshot", self.node_id)
        self.snapshots.taken()

    async def _snapshot_when_due(self) -> None:
        """The interval's half of the policy: records applied long ago, none since."""
        while True:
            await asyncio.sleep(min(max(self.snapshots.interval / 4, 0.1), 60.0))
            self._maybe_snapshot()

    @property
    def caught_up(self) -> bool:
        """A leader is known and this node has applied what it had committed."""
        return self.raft is not None and self.raft.caught_up

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Poll `condition`: it spans many messages and timers, so no one event says it."""
        for polls in itertools.count(1):
            if condition():
                return
            await asyncio.sleep(RETRY_BACKOFF)
            if polls % 200 == 0:
                log.info("node %d: waiting for the metadata quorum (voters %s)",
                         self.node_id, sorted(self.voters))

    def retire(self) -> None:
        """Stop standing for election; the first step of a shutdown."""
        if self.raft is not None:
            self.raft.retire()

    async def stop(self) -> None:
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
        if self.raft is not None:
            self.raft.stop()
        await self.rpc.close()
        await self.transport.close()
        if self.server is not None:
            await self.server.stop()
        if self.raft is not None:
            self.raft.storage.close()
        for _, future in self._apply_waiters:
            future.cancel()

    # -- state ----------------------------------------------------------------------------
    @property
    def active_controller_id(self) -> int:
        if self.raft is None or self.raft.leader_id is None:
            return -1
        return self.raft.leader_id

    @property
    def is_active(self) -> bool:
        """The Raft leader whose image holds everything committed before its term."""
        raft = self.raft
        return raft is not None and raft.role is Role.LEADER and raft.caught_up

    @property
    def applied_offset(self) -> int:
        return self.raft.applied_offset if self.raft is not None else -1

    def describe(self) -> QuorumState:
        """The quorum as its leader sees it (DescribeQuorum); NOT_CONTROLLER elsewhere."""
        raft = self.raft
        if raft is None or not self.is_active:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, "This is not the active controller.")
        now_ms, loop_now = int(time.time() * 1000), raft.scheduler.now()
        voters = [VoterState(self.node_id, raft.end_offset, now_ms, now_ms)]
        for voter, (end_offset, acked) in sorted(raft.follower_progress().items()):
            acked_ms = now_ms - int((loop_now - acked) * 1000)
            voters.append(VoterState(voter, end_offset, acked_ms,
                                     acked_ms if end_offset >= raft.end_offset else -1))
        return QuorumState(self.node_id, raft.term, raft.commit_offset + 1, voters)

    async def propose(self, records: list[MetadataRecord]) -> int:
        """On the active controller: commit and apply `records`; the last one's offset."""
        if self.raft is None or not self.is_active:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, "This is not the active controller.")
        try:
            first = await self.raft.propose([to_json(r) for r in records])
        except NotLeaderError as exc:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, str(exc)) from None
        # A lone voter has committed and applied them without yielding (and applying a
        # partition writes its log files): serve heartbeats and fetches before the next
        # proposal of the same call, as a quorum's replication round trip would.
        await asyncio.sleep(0)
        return first + len(records) - 1

    # -- calls ----------------------------------------------------------------------------
    async def call(self, method: str, args: dict[str, Any]) -> Any:
        """`method`'s result from the active controller, applied here before returning."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.request_timeout
        while True:
            try:
                result, offset = await self._call_once(method, args, deadline - loop.time())
                break
            except ControllerError as exc:
                if exc.error_code != ErrorCode.NOT_CONTROLLER or loop.time() >= deadline:
                    raise
            except (OSError, TimeoutError) as exc:
                if loop.time() >= deadline:
                    raise ControllerError(ErrorCode.REQUEST_TIMED_OUT,
                                          f"No answer from the active controller: {exc}") from None
            await asyncio.sleep(RETRY_BACKOFF)
        await self.wait_applied(offset, max(deadline - loop.time(), self.request_timeout))
        return result

    async def _call_once(self, method: str, args: dict[str, Any],
                         within: float) -> tuple[Any, int]:
        if self.is_active:
            return await self.local(method, args)
        leader = self.active_controller_id
        if leader < 0 or leader == self.node_id:
            raise ControllerError(ErrorCode.NOT_CONTROLLER, "No active controller is known.")
        async with asyncio.timeout(max(within, 0.01)):
            return await self.rpc.call(leader, method, args)

    async def wait_applied(self, offset: int, within: float) -> None:
        if self.applied_offset >= offset:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._apply_waiters.append((offset, future))
        try:
            async with asyncio.timeout(within):
                await future
        except TimeoutError:
            raise ControllerError(ErrorCode.REQUEST_TIMED_OUT,
                                  f"Metadata offset {offset} not applied here in time.") from None

    def _on_applied(self, offset: int) -> None:
        self._maybe_snapshot()
        waiting = []
        for wanted, future in self._apply_waiters:
            if future.done():
                continue
            if wanted <= offset:
                future.set_result(None)
            else:
                waiting.append((wanted, future))
        self._apply_waiters = waiting


def migrate_single_node_log(directory: Path) -> None:
    """Move a single-node `metadata.jsonl` (the format before the quorum) into the Raft log.

    The new log is built beside the old one and renamed into place, so a crash part-way
    leaves either the old file alone or the complete new log (and then the old file is
    only deleted).
    """
    old = directory / "metadata.jsonl"
    if not old.exists():
        return
    target = directory / "raft.jsonl"
    if not target.exists():
        records = _read_single_node_log(old)
        building = directory.with_name(directory.name + ".migrating")
        shutil.rmtree(building, ignore_errors=True)
        storage = FileRaftStorage(building)
        storage.save_vote(1, None)  # term 1 holds the migrated entries; elections start at 2
        storage.append([Entry(1, record) for record in records])
        storage.close()
        (building / "quorum-state.json").replace(directory / "quorum-state.json")
        (building / "raft.jsonl").replace(target)
        shutil.rmtree(building, ignore_errors=True)
        log.info("migrated %d metadata records from %s into the Raft log", len(records), old)
    with contextlib.suppress(FileNotFoundError):
        old.unlink()


def _read_single_node_log(path: Path) -> list[Record]:
    """`{"offset": N, "record": {...}}` lines; a torn tail (the old log's own rule) ends it."""
    records = []
    with open(path, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            try:
                records.append(json.loads(line)["record"])
            except (ValueError, KeyError, TypeError):
                break
    return records
