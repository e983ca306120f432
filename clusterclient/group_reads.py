"""Many groups' descriptions and committed offsets in one request per coordinator.

librdkafka's admin API takes one group per OffsetFetch and sends a DescribeGroups (or
ConsumerGroupDescribe) per group, so a collector reading 1,000 groups paid 2,000 requests
a cycle. Kafka batches all three per coordinator: DescribeGroups always took a list of
groups, ConsumerGroupDescribe (KIP-848) does too, and OffsetFetch does from v8 (KIP-709);
FindCoordinator v4 (KIP-699) finds the coordinators of many keys at once. `GroupReader`
sends those over its own connections (wire.py): one FindCoordinator, then per coordinator
ConsumerGroupDescribe and DescribeGroups side by side (a group is described by the first
that knows it, as librdkafka falls back from one to the other), or one OffsetFetch.
Coordinators are remembered; a NOT_COORDINATOR (or one loading) sends its groups back to
FindCoordinator until the client's timeout.

Answers are this package's values, as ClusterClient's librdkafka path gives them:
`ConsumerGroup` and `GroupOffsets`, errors as ClusterRequestError / ClusterUnavailable.
"""

from __future__ import annotations

import threading
import time
import types
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kafka.protocol.admin import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

from . import schemas
from .errors import ClusterRequestError, ClusterUnavailable
from .groups import (
    ConsumerGroup,
    GroupListing,
    GroupMember,
    GroupOffsets,
    GroupState,
    GroupType,
    group_type,
)
from .metadata import Broker, TopicPartition
from .wire import Connection, request_error


def _message(name: str) -> Any:
    """kafka-python's codec class for `schemas/<name>.json`."""
    return types.new_class(name, (ApiMessage,), {"load_json": schemas})


ConsumerGroupDescribeRequest = _message("ConsumerGroupDescribeRequest")
ConsumerGroupDescribeResponse = _message("ConsumerGroupDescribeResponse")

FIND_COORDINATOR, DESCRIBE_GROUPS, OFFSET_FETCH, CONSUMER_GROUP_DESCRIBE = 4, 5, 8, 0
LIST_GROUPS, METADATA = 5, 12
GROUP_ID_NOT_FOUND = 69
# Kafka's state names (DescribeGroups, ConsumerGroupDescribe) as GroupState.
STATES = {"Empty": GroupState.EMPTY, "PreparingRebalance": GroupState.PREPARING_REBALANCE,
          "CompletingRebalance": GroupState.COMPLETING_REBALANCE,
          "Assigning": GroupState.ASSIGNING, "Reconciling": GroupState.RECONCILING,
          "Stable": GroupState.STABLE, "Dead": GroupState.DEAD}
RETRY_PAUSE_S = 0.1
IDLE_S = 60.0  # a connection unused this long is opened afresh (see _connection)
# A read's two halves, per coordinator: send its groups' request(s), returning what the
# receive needs to know; receive (connection, coordinator, that, deadline, groups to look
# up afresh) -> answers by group.
Send = Callable[["Connection", list[str]], Any]
Receive = Callable[["Connection", Broker, Any, float, list[str]], dict[str, Any]]


class Unbatched(Exception):
    """The cluster does not serve the batched forms (FindCoordinator v4, OffsetFetch v8):
    the caller uses librdkafka's per-group requests."""


class GroupReader:
    """Batched group reads of one cluster; thread-safe (one read at a time)."""

    def __init__(self, bootstrap_servers: str, config: Mapping[str, Any], timeout: float
                 ) -> None:
        self.bootstrap = [_address(a) for a in bootstrap_servers.split(",") if a.strip()]
        self.config = dict(config)
        self.timeout = timeout
        self._connections: dict[tuple[str, int], Connection] = {}
        self._coordinators: dict[str, Broker] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            for connection in self._connections.values():
                connection.close()
            self._connections.clear()

    # --- the two reads ---------------------------------------------------------------
    def describe(self, group_ids: Sequence[str]) -> dict[str, ConsumerGroup]:
        """Every group described (a group Kafka does not know comes back DEAD, classic); a
        group's error (GROUP_AUTHORIZATION_FAILED) is raised, as librdkafka's path does."""
        with self._lock:
            return self._per_coordinator(list(dict.fromkeys(group_ids)), self._send_describe,
                                         self._receive_describe, _raise)

    def committed(self, group_ids: Sequence[str]) -> dict[str, GroupOffsets]:
        """Committed offsets (partitions without a commit left out); a group's own error is
        a value, an unreachable coordinator raises ClusterUnavailable."""
        with self._lock:
            return self._per_coordinator(list(dict.fromkeys(group_ids)), self._send_fetch,
                                         self._receive_fetch,
                                         lambda g, exc: GroupOffsets(g, {}, exc))

    def list_groups(self, types: Sequence[str] = ()) -> list[GroupListing]:
        """Every broker's groups (ListGroups v5, `types` Kafka's "classic"/"consumer"),
        the brokers from a Metadata request sent now. librdkafka's listing asks every broker
        it has known, and one that has just stopped kept it waiting for the whole timeout
        (then, at times, aborting its process: librdkafka#4605); here a broker that has
        left the metadata is not asked, and one that refuses the connection fails at once.
        If some broker did not answer, the others' groups are returned; if none answered,
        its error is raised, as ClusterClient's librdkafka path does."""
        with self._lock:
            deadline = time.monotonic() + self.timeout
            brokers = self._brokers(deadline)
            sent: list[Connection] = []
            errors: list[ClusterRequestError | ClusterUnavailable] = []
            for broker in brokers:
                try:
                    connection = self._connection(broker.host, broker.port)
                    version = self._version(connection, ListGroupsRequest, LIST_GROUPS)
                    connection.send(ListGroupsRequest(states_filter=[],
                                                      types_filter=list(types)),
                                    ListGroupsResponse, version)
                    sent.append(connection)
                except ClusterUnavailable as exc:
                    self._drop_address(broker.host, broker.port)
                    errors.append(exc)
                except BaseException:  # Unbatched: the answers sent for are never read
                    for unread in sent:
                        self._drop(unread)
                    raise
            found: dict[str, GroupListing] = {}
            for connection in sent:
                try:
                    answer = self._receive(connection, deadline)
                except ClusterUnavailable as exc:
                    errors.append(exc)
                    continue
                if answer.error_code:
                    errors.append(request_error(answer.error_code))
                    continue
                for g in answer.groups:
                    found[g.group_id] = GroupListing(
                        g.group_id, not g.protocol_type,
                        STATES.get(g.group_state, GroupState.UNKNOWN),
                        group_type(g.group_type or "classic"))
            if errors and not found:
                raise errors[0]
            return sorted(found.values(), key=lambda g: g.group_id)

    def _brokers(self, deadline: float) -> list[Broker]:
        """The cluster's brokers now, from one Metadata request (no topics) to a broker
        already connected, else to each bootstrap server in turn."""
        problem: ClusterUnavailable | None = None
        for host, port in dict.fromkeys([*self._connections, *self.bootstrap]):
            try:
                connection = self._connection(host, port)
                version = min(METADATA, connection.versions.get(MetadataRequest.API_KEY,
                                                                (0, -1))[1])
                if version < 1:
                    raise Unbatched(f"{host}:{port} does not serve Metadata v1")
                connection.send(MetadataRequest(topics=[], allow_auto_topic_creation=False),
                                MetadataResponse, version)
                answer = self._receive(connection, deadline)
                return [Broker(b.node_id, b.host, b.port) for b in answer.brokers]
            except ClusterUnavailable as exc:
                self._drop_address(host, port)
                problem = exc
        raise problem or ClusterUnavailable("no bootstrap servers", None, "_TRANSPORT")

    # --- per coordinator, with retries -----------------------------------------------
    def _per_coordinator(self, group_ids: list[str], send: Send, receive: Receive,
                         refused: Callable[[str, ClusterRequestError], Any]) -> dict[str, Any]:
        """`send` the request(s) of each coordinator's groups, then `receive` each answer.
        `refused` makes the answer of a group FindCoordinator refused (an authorization
        error). A coordinator that moved, is loading or cannot be reached sends its groups
        back to FindCoordinator until the timeout, as librdkafka retries them."""
        deadline = time.monotonic() + self.timeout
        answers: dict[str, Any] = {}
        pending = group_ids
        while pending:
            coordinators, errors = self._find(pending, deadline)
            answers.update((g, refused(g, exc)) for g, exc in errors.items())
            again = self._round(coordinators, send, receive, deadline, answers)
            for group_id in again:  # moved, loading or unreachable: look it up afresh
                self._coordinators.pop(group_id, None)
            pending = [g for g in dict.fromkeys(again) if g not in answers]
            if pending:
                if time.monotonic() + RETRY_PAUSE_S >= deadline:
                    raise ClusterUnavailable(
                        f"the coordinators of {len(pending)} group(s) did not answer within "
                        f"{self.timeout:.0f}s ({pending[0]}, ...)", None, "_TIMED_OUT")
                time.sleep(RETRY_PAUSE_S)
        return answers

    def _round(self, coordinators: dict[str, Broker], send: Send, receive: Receive,
               deadline: float, answers: dict[str, Any]) -> list[str]:
        """Every coordinator's request(s) sent, then every answer read into `answers`; the
        groups whose coordinator moved, is loading or did not answer."""
        by_coordinator: dict[Broker, list[str]] = defaultdict(list)
        for group_id, coordinator in coordinators.items():
            by_coordinator[coordinator].append(group_id)
        again: list[str] = []
        sent = []
        for broker, groups in by_coordinator.items():
            try:
                connection = self._connection(broker.host, broker.port)
                sent.append((connection, broker, groups, send(connection, groups)))
            except ClusterUnavailable:  # its groups look for their coordinator afresh
                self._drop_address(broker.host, broker.port)
                again.extend(groups)
            except BaseException:  # Unbatched: the answers sent for are never read
                for unread, *_ in sent:
                    self._drop(unread)
                raise
        for i, (connection, broker, groups, extra) in enumerate(sent):
            try:
                answers.update(receive(connection, broker, extra, deadline, again))
            except ClusterUnavailable:
                again.extend(groups)
            except BaseException:  # answers left unread would meet the next request
                for unread, *_ in sent[i:]:
                    self._drop(unread)
                raise
        return again

    def _send_describe(self, connection: Connection, groups: list[str]) -> bool:
        """ConsumerGroupDescribe (KIP-848 groups, first, as librdkafka asks) if the broker
        serves it, and DescribeGroups; whether the first went out."""
        describe = self._version(connection, DescribeGroupsRequest, DESCRIBE_GROUPS)
        both = connection.version(ConsumerGroupDescribeRequest, CONSUMER_GROUP_DESCRIBE)
        if both is not None:
            connection.send(ConsumerGroupDescribeRequest(
                group_ids=groups, include_authorized_operations=False),
                ConsumerGroupDescribeResponse, both)
        connection.send(DescribeGroupsRequest(groups=groups, include_authorized_operations=False),
                        DescribeGroupsResponse, describe)
        return both is not None

    def _receive_describe(self, connection: Connection, broker: Broker, both: bool,
                          deadline: float, again: list[str]) -> dict[str, ConsumerGroup]:
        consumer = {}
        if both:
            for g in self._receive(connection, deadline).groups:
                if g.error_code == 0:
                    consumer[g.group_id] = _consumer_group(g, broker)
                elif g.error_code != GROUP_ID_NOT_FOUND:  # that one: not a consumer group
                    self._group_error(g.group_id, g.error_code, g.error_message, again)
        found: dict[str, ConsumerGroup] = {}
        for g in self._receive(connection, deadline).groups:
            if g.group_id in consumer:
                found[g.group_id] = consumer[g.group_id]
            elif g.error_code == 0:
                found[g.group_id] = _classic_group(g, broker)
            elif g.group_id not in again:
                self._group_error(g.group_id, g.error_code, None, again)
        for group_id in again:
            found.pop(group_id, None)
        return found

    def _send_fetch(self, connection: Connection, groups: list[str]) -> None:
        group = OffsetFetchRequest.OffsetFetchRequestGroup
        connection.send(OffsetFetchRequest(
            groups=[group(group_id=g, topics=None) for g in groups], require_stable=False),
            OffsetFetchResponse, self._version(connection, OffsetFetchRequest, OFFSET_FETCH))

    def _receive_fetch(self, connection: Connection, broker: Broker, _: None,
                       deadline: float, again: list[str]) -> dict[str, GroupOffsets]:
        found: dict[str, GroupOffsets] = {}
        for g in self._receive(connection, deadline).groups:
            try:
                self._group_error(g.group_id, g.error_code, None, again)
            except ClusterRequestError as exc:
                found[g.group_id] = GroupOffsets(g.group_id, {}, exc)
                continue
            if g.error_code == 0:
                found[g.group_id] = GroupOffsets(g.group_id, {
                    TopicPartition(t.name, p.partition_index): int(p.committed_offset)
                    for t in g.topics for p in t.partitions
                    if p.committed_offset >= 0 and p.error_code == 0})
        return found

    @staticmethod
    def _group_error(group_id: str, code: int, message: str | None, again: list[str]) -> None:
        """Nothing for NO_ERROR; a coordinator moved or loading: into `again`; else raised."""
        if code == 0:
            return
        problem = request_error(code, message)
        if isinstance(problem, ClusterUnavailable):
            again.append(group_id)
            return
        raise problem

    def _receive(self, connection: Connection, deadline: float) -> Any:
        try:
            return connection.receive(deadline)
        except BaseException:
            self._drop(connection)
            raise

    # --- coordinators and connections --------------------------------------------------
    def _find(self, group_ids: Iterable[str], deadline: float
              ) -> tuple[dict[str, Broker], dict[str, ClusterRequestError]]:
        """The coordinator of each group (remembered, or from one FindCoordinator v4 to any
        broker that answers), and the groups it refused, with the refusal."""
        wanted = list(group_ids)
        refused: dict[str, ClusterRequestError] = {}

        def unknown() -> list[str]:
            return [g for g in wanted if g not in self._coordinators and g not in refused]

        # Until every group has a coordinator or a refusal: a group loading, one the answer
        # left out, or one whose remembered coordinator a failed connection made us forget
        # (_drop_address, in _find_once) is asked for again.
        while missing := unknown():
            answer = self._find_once(missing, deadline)
            for c in answer.coordinators:
                if c.error_code == 0:
                    self._coordinators[c.key] = Broker(c.node_id, c.host, c.port)
                    continue
                problem = request_error(c.error_code, c.error_message)
                if not isinstance(problem, ClusterUnavailable):  # loading: asked again
                    refused[c.key] = problem
            if missing := unknown():
                if time.monotonic() + RETRY_PAUSE_S >= deadline:
                    raise ClusterUnavailable(f"no coordinator for {missing[0]} within "
                                             f"{self.timeout:.0f}s", 15,
                                             "COORDINATOR_NOT_AVAILABLE")
                time.sleep(RETRY_PAUSE_S)
        return {g: self._coordinators[g] for g in wanted if g not in refused}, refused

    def _find_once(self, keys: list[str], deadline: float) -> Any:
        """One FindCoordinator v4: on a connection already open, else to each bootstrap
        server in turn, until one answers."""
        candidates = [*self._connections, *self.bootstrap]
        problem: ClusterUnavailable | None = None
        for host, port in dict.fromkeys(candidates):
            try:
                connection = self._connection(host, port)
                version = self._version(connection, FindCoordinatorRequest, FIND_COORDINATOR)
                connection.send(FindCoordinatorRequest(key_type=0, coordinator_keys=keys),
                                FindCoordinatorResponse, version)
                return self._receive(connection, deadline)
            except ClusterUnavailable as exc:
                self._drop_address(host, port)
                problem = exc
        raise problem or ClusterUnavailable("no bootstrap servers", None, "_TRANSPORT")

    def _version(self, connection: Connection, api: Any, wanted: int) -> int:
        version = connection.version(api, wanted)
        if version is None:
            raise Unbatched(f"{connection.host}:{connection.port} does not serve "
                            f"{api.__name__} v{wanted}")
        return version

    def _connection(self, host: str, port: int) -> Connection:
        """The open connection to host:port, or a new one. One idle for longer than
        IDLE_S is replaced: a broker closes connections idle for connections.max.idle.ms
        (10 minutes by default), and a request on one it closed would fail."""
        found = self._connections.get((host, port))
        if found is not None and time.monotonic() - found.used > IDLE_S:
            self._drop(found)
            found = None
        if found is None:
            found = self._connections[(host, port)] = Connection(host, port, self.config,
                                                                 self.timeout)
        return found

    def _drop(self, connection: Connection) -> None:
        connection.close()
        self._drop_address(connection.host, connection.port)

    def _drop_address(self, host: str, port: int) -> None:
        """Forget the connection to host:port and which groups it coordinates."""
        gone = self._connections.pop((host, port), None)
        if gone is not None:
            gone.close()
        for group_id in [g for g, b in self._coordinators.items() if (b.host, b.port) == (
                host, port)]:
            del self._coordinators[group_id]


def _raise(group_id: str, problem: ClusterRequestError) -> Any:
    raise problem


def _address(entry: str) -> tuple[str, int]:
    entry = entry.strip().rsplit("://", 1)[-1]
    host, _, port = entry.rpartition(":")
    return host.strip("[]") or entry, int(port or 9092)


def _classic_group(g: Any, coordinator: Broker) -> ConsumerGroup:
    """A DescribeGroups answer as librdkafka's describe_consumer_groups gives it: the
    assignor is the protocol name, a member's assignment decoded for the consumer protocol,
    an empty protocol type is a simple (assign-only) group."""
    consumer = g.protocol_type == "consumer"
    members = tuple(
        GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    _assigned(m.member_assignment) if consumer else (), None)
        for m in g.members)
    return ConsumerGroup(g.group_id, not g.protocol_type, STATES.get(g.group_state,
                                                                     GroupState.UNKNOWN),
                         g.protocol_data or "", coordinator, members, GroupType.CLASSIC)


def _assigned(raw: bytes | None) -> tuple[TopicPartition, ...]:
    if not raw:
        return ()
    try:
        assignment = ConsumerProtocolAssignment.decode(raw)
    except (ValueError, IndexError, TypeError, EOFError) as exc:
        raise ClusterRequestError(2, "CORRUPT_MESSAGE",
                                  f"a member's assignment does not decode: {exc}") from exc
    return tuple(sorted(TopicPartition(tp.topic, p) for tp in assignment.assigned_partitions
                        for p in tp.partitions))


def _consumer_group(g: Any, coordinator: Broker) -> ConsumerGroup:
    members = tuple(
        GroupMember(m.member_id, m.instance_id, m.client_id, m.client_host,
                    _partitions(m.assignment), _partitions(m.target_assignment))
        for m in g.members)
    return ConsumerGroup(g.group_id, False, STATES.get(g.group_state, GroupState.UNKNOWN),
                         g.assignor_name or "", coordinator, members, GroupType.CONSUMER)


def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    return tuple(sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions
                        for p in t.partitions))
