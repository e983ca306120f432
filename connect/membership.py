"""A worker's membership in its Connect group, over the wire: FindCoordinator, JoinGroup,
SyncGroup, Heartbeat and LeaveGroup with protocol type `connect`.

confluent-kafka (librdkafka) only joins groups as a consumer (protocol type `consumer`), so
the worker speaks the classic group protocol itself, with kafka-python's request classes as
the codec (as brokercore does). It is synchronous and owned by the herder's thread, which
calls `heartbeat()` between its other work, as Kafka's DistributedHerder ticks its member.

On a secured cluster each connection speaks the worker's own client settings (`Security`,
from the same librdkafka keys its producers and consumers get): TLS with the CA of
`ssl.ca.location` for SSL and SASL_SSL, then SaslHandshake v1 and SaslAuthenticate v1 with
PLAIN or SCRAM-SHA-256/512 (kafka-python's SCRAM client) for SASL_*. A refused login is a
`GroupError`: retrying the same password cannot help.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.net.sasl.scram import ScramClient
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from connect.protocol import PROTOCOL_TYPE

log = logging.getLogger(__name__)

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
COORDINATOR_ERRORS = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR}

# The leader's assignment: (chosen protocol, every member's metadata) -> member's assignment
Assignor = Callable[[str, dict[str, bytes]], dict[str, bytes]]
Protocols = list[tuple[str, bytes]]  # (name, metadata), most preferred first


class GroupError(Exception):
    """The coordinator answered with an error the member cannot recover from."""


@dataclass(frozen=True)
class Joined:
    generation: int
    member_id: str
    leader_id: str
    protocol: str
    assignment: bytes


@dataclass(frozen=True)
class Security:
    """How the member reaches brokers: `security.protocol` and, for SASL, the mechanism and
    login; for TLS the CA (PEM) that signed the brokers' certificates (empty: the system's)
    and whether their name is checked (`ssl.endpoint.identification.algorithm`)."""

    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"
    username: str = ""
    password: str = ""
    ca_location: str = ""
    check_hostname: bool = True

    @classmethod
    def from_client_settings(cls, settings: dict[str, str]) -> Security:
        return cls(
            protocol=settings.get("security.protocol", "PLAINTEXT").upper(),
            mechanism=(settings.get("sasl.mechanisms") or settings.get("sasl.mechanism")
                       or "GSSAPI").upper(),
            username=settings.get("sasl.username", ""),
            password=settings.get("sasl.password", ""),
            ca_location=settings.get("ssl.ca.location", ""),
            check_hostname=settings.get("ssl.endpoint.identification.algorithm",
                                        "https").lower() == "https")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_location or None)
        context.check_hostname = self.check_hostname
        return context


class _Connection:
    def __init__(self, host: str, port: int, timeout: float, client_id: str,
                 security: Security | None = None) -> None:
        security = security or Security()
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            self.sock = (security.context().wrap_socket(sock, server_hostname=host)
                         if security.tls else sock)
        except (OSError, ssl.SSLError):
            sock.close()
            raise
        self.client_id = client_id
        self.correlation_id = 0
        if security.sasl:
            try:
                self._authenticate(security)
            except (OSError, GroupError):
                self.close()
                raise

    def _authenticate(self, security: Security) -> None:
        handshake = self.request(SaslHandshakeRequest(mechanism=security.mechanism), 1)
        if handshake.error_code != NONE:
            raise GroupError(f"SASL mechanism {security.mechanism} refused (error "
                             f"{handshake.error_code}; the broker offers "
                             f"{', '.join(handshake.mechanisms)})")
        if security.mechanism == "PLAIN":
            self._sasl_step(f"\0{security.username}\0{security.password}".encode())
        elif security.mechanism in ScramClient.MECHANISMS:
            scram = ScramClient(security.username, security.password, security.mechanism)
            try:
                scram.process_server_first_message(self._sasl_step(scram.first_message()))
                scram.process_server_final_message(self._sasl_step(scram.final_message()))
            except ValueError as exc:  # a server proof that does not check out
                raise GroupError(f"SCRAM login as {security.username}: {exc}") from None
        else:
            raise GroupError(f"SASL mechanism {security.mechanism} is not supported by the "
                             "Connect worker's group member (PLAIN, SCRAM-SHA-256/512)")

    def _sasl_step(self, token: bytes) -> bytes:
        answer = self.request(SaslAuthenticateRequest(auth_bytes=token), 1)
        if answer.error_code != NONE:
            raise GroupError(f"SASL authentication failed: {answer.error_message}")
        return bytes(answer.auth_bytes)

    def request(self, request: Any, version: int) -> Any:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        self.sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        return request.header.get_response_class().decode(frame, version=version, header=True)

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("the coordinator closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


class GroupMember:
    def __init__(self, bootstrap_servers: str, group_id: str, *, client_id: str,
                 session_timeout_ms: int, rebalance_timeout_ms: int,
                 security: Security | None = None) -> None:
        self.bootstrap = [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
        self.security = security or Security()
        self.group_id = group_id
        self.client_id = client_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self._coordinator: _Connection | None = None

    # --- coordinator -------------------------------------------------------------------
    def _connection(self) -> _Connection:
        if self._coordinator is None:
            self._coordinator = self._find_coordinator()
        return self._coordinator

    def _find_coordinator(self) -> _Connection:
        timeout = self.rebalance_timeout_ms / 1000 + 10
        for server in self.bootstrap:
            host, port = server.rsplit(":", 1)
            try:
                boot = _Connection(host, int(port), 10, self.client_id, self.security)
            except OSError as exc:
                log.warning("bootstrap %s: %s", server, exc)
                continue
            try:
                found = boot.request(FindCoordinatorRequest(key=self.group_id, key_type=0), 2)
            except OSError as exc:
                log.warning("FindCoordinator via %s: %s", server, exc)
                continue
            finally:
                boot.close()
            if found.error_code == NONE:
                return _Connection(found.host, found.port, timeout, self.client_id,
                                   self.security)
            log.info("group %s: FindCoordinator: error %d", self.group_id, found.error_code)
        raise ConnectionError(f"no coordinator found for group {self.group_id}")

    def _drop_coordinator(self) -> None:
        if self._coordinator is not None:
            self._coordinator.close()
            self._coordinator = None

    def _call(self, request: Any, version: int) -> Any:
        try:
            return self._connection().request(request, version)
        except OSError:
            self._drop_coordinator()
            raise

    # --- membership --------------------------------------------------------------------
    def join(self, protocols: Protocols, assignor: Assignor,
             deadline_s: float = 120) -> Joined:
        """JoinGroup then SyncGroup until a generation is joined; the leader's `assignor`
        maps every member's metadata (for the protocol the coordinator chose) to its
        assignment."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                joined = self._join_once(protocols, assignor)
            except OSError as exc:
                log.warning("group %s: %s; finding the coordinator again", self.group_id, exc)
                time.sleep(0.5)
                continue
            if joined is not None:
                return joined
        raise GroupError(f"group {self.group_id}: could not join in {deadline_s}s")

    def _join_once(self, protocols: Protocols, assignor: Assignor) -> Joined | None:
        resp = self._call(JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=None, protocol_type=PROTOCOL_TYPE,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                       for n, m in protocols]), 5)
        if not self._retry_join(resp.error_code, resp.member_id):
            return None
        self.member_id, self.generation = resp.member_id, resp.generation_id
        assignments: dict[str, bytes] = {}
        if resp.leader == resp.member_id:
            assignments = assignor(resp.protocol_name,
                                   {m.member_id: bytes(m.metadata) for m in resp.members})
        sync = self._call(SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None, protocol_type=PROTOCOL_TYPE,
            protocol_name=resp.protocol_name,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in assignments.items()]), 5)
        if not self._retry_join(sync.error_code, self.member_id):
            return None
        return Joined(self.generation, self.member_id, resp.leader, resp.protocol_name,
                      bytes(sync.assignment))

    def _retry_join(self, error: int, member_id: str) -> bool:
        """True when the step succeeded; False to join again; raises what cannot be retried."""
        if error == NONE:
            return True
        log.info("group %s: member %r: error %d while joining", self.group_id, member_id, error)
        if error == MEMBER_ID_REQUIRED:
            self.member_id = member_id
        elif error in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            self.member_id = ""
        elif error in COORDINATOR_ERRORS:
            self._drop_coordinator()
            time.sleep(0.2)
        elif error != REBALANCE_IN_PROGRESS:
            raise GroupError(f"group {self.group_id}: join failed with error {error}")
        return False

    def heartbeat(self) -> int:
        """One Heartbeat; its error code (REBALANCE_IN_PROGRESS means: join again)."""
        try:
            resp = self._call(HeartbeatRequest(
                group_id=self.group_id, generation_id=self.generation,
                member_id=self.member_id, group_instance_id=None), 3)
        except OSError:
            return COORDINATOR_NOT_AVAILABLE
        if resp.error_code in COORDINATOR_ERRORS:
            self._drop_coordinator()
        elif resp.error_code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            self.member_id = ""
        return int(resp.error_code)

    def leave(self) -> None:
        if not self.member_id:
            return
        try:
            self._call(LeaveGroupRequest(group_id=self.group_id, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id,
                                                 group_instance_id=None,
                                                 reason="the worker is stopping")]), 5)
        except OSError as exc:
            log.info("group %s: LeaveGroup: %s", self.group_id, exc)
        self.member_id = ""
        self._drop_coordinator()
