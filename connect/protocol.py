"""The Connect group protocol's bytes: what a worker says when it joins, and what the leader
assigns (Kafka's ConnectProtocol, version 0, protocol `default`, eager; and
IncrementalCooperativeConnectProtocol, version 1, protocol `compatible`).

    metadata v0   = version:int16 url:string config_offset:int64
    metadata v1   = v0 + allocation:nullable bytes (this worker's current assignment, v1)
    assignment v0 = version:int16 error:int16 leader:string leader_url:string
                    config_offset:int64 assigned:[connector:string [task:int32]]
    assignment v1 = v0 + revoked:[connector:string [task:int32]] delay:int32

A connector itself is task id -1 in its connector's task list (Kafka's CONNECTOR_TASK).
Our v1 `assigned` is the worker's whole assignment after the revocations, not only what is
new; Java workers and ours do not share a group.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

PROTOCOL_TYPE = "connect"
EAGER = "default"
COOPERATIVE = "compatible"
VERSIONS = {EAGER: 0, COOPERATIVE: 1}
CONNECTOR_TASK = -1
# Assignment errors (Kafka's ConnectProtocol.Assignment).
NO_ERROR = 0
CONFIG_MISMATCH = 1

TaskId = tuple[str, int]


@dataclass(frozen=True)
class Assignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[TaskId, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[TaskId, ...] = ()
    delay_ms: int = 0

    def failed(self) -> bool:
        return self.error != NO_ERROR


@dataclass(frozen=True)
class WorkerState:
    url: str
    config_offset: int
    assignment: Assignment | None = None  # v1: what the worker runs now


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str:
        size = self.unpack(">h")
        value = self.data[self.pos:self.pos + size].decode()
        self.pos += size
        return value

    def raw(self, size: int) -> bytes:
        value = self.data[self.pos:self.pos + size]
        self.pos += size
        return value

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def encode_metadata(state: WorkerState, version: int = 0) -> bytes:
    out = struct.pack(">h", version) + _string(state.url) + struct.pack(">q", state.config_offset)
    if version >= 1:
        if state.assignment is None:
            out += struct.pack(">i", -1)
        else:
            allocation = encode_assignment(state.assignment, 1)
            out += struct.pack(">i", len(allocation)) + allocation
    return out


def decode_metadata(data: bytes) -> WorkerState:
    reader = _Reader(data)
    version = reader.unpack(">h")
    url, offset = reader.string(), reader.unpack(">q")
    assignment = None
    if version >= 1 and not reader.at_end():
        size = reader.unpack(">i")
        if size >= 0:
            assignment = decode_assignment(reader.raw(size))
    return WorkerState(url, offset, assignment)


def _encode_units(connectors: tuple[str, ...], tasks: tuple[TaskId, ...],
                  with_connector: bool = True) -> bytes:
    by_connector: dict[str, list[int]] = {name: [CONNECTOR_TASK] for name in connectors}
    for name, task in tasks:
        by_connector.setdefault(name, []).append(task)
    out = [struct.pack(">i", len(by_connector))]
    for name, ids in by_connector.items():
        out.append(_string(name) + struct.pack(f">i{len(ids)}i", len(ids), *ids))
    return b"".join(out)


def _decode_units(reader: _Reader) -> tuple[tuple[str, ...], tuple[TaskId, ...]]:
    connectors: list[str] = []
    tasks: list[TaskId] = []
    for _ in range(reader.unpack(">i")):
        name = reader.string()
        for _ in range(reader.unpack(">i")):
            task = reader.unpack(">i")
            if task == CONNECTOR_TASK:
                connectors.append(name)
            else:
                tasks.append((name, task))
    return tuple(connectors), tuple(tasks)


def encode_assignment(assignment: Assignment, version: int = 0) -> bytes:
    out = (struct.pack(">hh", version, assignment.error) + _string(assignment.leader)
           + _string(assignment.leader_url) + struct.pack(">q", assignment.config_offset)
           + _encode_units(assignment.connectors, assignment.tasks))
    if version >= 1:
        out += _encode_units(assignment.revoked_connectors, assignment.revoked_tasks)
        out += struct.pack(">i", assignment.delay_ms)
    return out


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    version = reader.unpack(">h")
    error = reader.unpack(">h")
    leader, leader_url = reader.string(), reader.string()
    offset = reader.unpack(">q")
    connectors, tasks = _decode_units(reader)
    if version < 1:
        return Assignment(error, leader, leader_url, offset, connectors, tasks)
    revoked_connectors, revoked_tasks = _decode_units(reader)
    delay = reader.unpack(">i")
    return Assignment(error, leader, leader_url, offset, connectors, tasks, revoked_connectors,
                      revoked_tasks, delay)
