"""The Connect group protocol's bytes: what a worker says when it joins, what the leader
assigns (Kafka's `ConnectProtocol`, version 0, protocol name `default`, eager).

    metadata   = version:int16 url:string config_offset:int64
    assignment = version:int16 error:int16 leader:string leader_url:string
                 config_offset:int64 [connector:string [task:int32]]

A connector itself is task id -1 in its connector's task list (Kafka's CONNECTOR_TASK).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

PROTOCOL_TYPE = "connect"
EAGER = "default"
VERSION = 0
CONNECTOR_TASK = -1
# Assignment errors (Kafka's ConnectProtocol.Assignment).
NO_ERROR = 0
CONFIG_MISMATCH = 1


@dataclass(frozen=True)
class WorkerState:
    url: str
    config_offset: int


@dataclass(frozen=True)
class Assignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[tuple[str, int], ...] = field(default=())

    def failed(self) -> bool:
        return self.error != NO_ERROR


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


def encode_metadata(state: WorkerState) -> bytes:
    return struct.pack(">h", VERSION) + _string(state.url) + struct.pack(">q", state.config_offset)


def decode_metadata(data: bytes) -> WorkerState:
    reader = _Reader(data)
    reader.unpack(">h")  # later versions only add fields after these
    return WorkerState(url=reader.string(), config_offset=reader.unpack(">q"))


def encode_assignment(assignment: Assignment) -> bytes:
    by_connector: dict[str, list[int]] = {name: [CONNECTOR_TASK] for name in
                                          assignment.connectors}
    for name, task in assignment.tasks:
        by_connector.setdefault(name, []).append(task)
    out = [struct.pack(">hh", VERSION, assignment.error), _string(assignment.leader),
           _string(assignment.leader_url), struct.pack(">qi", assignment.config_offset,
                                                      len(by_connector))]
    for name, tasks in by_connector.items():
        out.append(_string(name) + struct.pack(">i", len(tasks)))
        out.append(struct.pack(f">{len(tasks)}i", *tasks))
    return b"".join(out)


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    reader.unpack(">h")
    error = reader.unpack(">h")
    leader, leader_url = reader.string(), reader.string()
    offset = reader.unpack(">q")
    connectors: list[str] = []
    tasks: list[tuple[str, int]] = []
    for _ in range(reader.unpack(">i")):
        name = reader.string()
        for _ in range(reader.unpack(">i")):
            task = reader.unpack(">i")
            if task == CONNECTOR_TASK:
                connectors.append(name)
            else:
                tasks.append((name, task))
    return Assignment(error, leader, leader_url, offset, tuple(connectors), tuple(tasks))


def assign(members: dict[str, WorkerState], connectors: list[str],
           tasks: list[tuple[str, int]]) -> dict[str, tuple[list[str], list[tuple[str, int]]]]:
    """Eager round robin, as Kafka's EagerAssignor: connectors then tasks, in sorted order,
    over the members sorted by id."""
    order = sorted(members)
    plan: dict[str, tuple[list[str], list[tuple[str, int]]]] = {m: ([], []) for m in order}
    for i, name in enumerate(sorted(connectors)):
        plan[order[i % len(order)]][0].append(name)
    for i, task in enumerate(sorted(tasks)):
        plan[order[i % len(order)]][1].append(task)
    return plan
