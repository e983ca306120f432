"""Protobuf values on the wire, for whatever in the platform decodes them.

Confluent's framing: magic byte 0, the 4-byte schema id, then the *message indexes* that
say which message of the schema's file the value is (a zig-zag varint count, then as many
zig-zag varint indexes, the first among the file's top-level messages and each next among
the previous one's nested messages; the common `[0]` is written as a single 0 byte), then
the message itself.
"""

from __future__ import annotations

import threading
from typing import Any

from google.protobuf import descriptor_pb2 as pb
from google.protobuf import descriptor_pool, message_factory

from . import ProtobufSchema, compiler

_pools: dict[tuple[str, tuple[str, ...]], descriptor_pool.DescriptorPool] = {}
_lock = threading.Lock()


def read_message_indexes(value: bytes, offset: int = 5) -> tuple[list[int], int]:
    """The indexes that start at `offset` (after magic byte and id) and where the message
    starts; ValueError if they run past the value."""
    count, offset = _zigzag(value, offset)
    if count == 0:
        return [0], offset
    if count < 0 or count > 64:
        raise ValueError(f"implausible message index count {count}")
    indexes = []
    for _ in range(count):
        index, offset = _zigzag(value, offset)
        indexes.append(index)
    return indexes, offset


def _zigzag(value: bytes, offset: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if offset >= len(value) or shift > 63:
            raise ValueError("message indexes run past the value")
        byte = value[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), offset


def message_name(file: pb.FileDescriptorProto, indexes: list[int]) -> str:
    """The full name of the message `indexes` point at; ValueError if none."""
    messages = list(file.message_type)
    names: list[str] = [file.package] if file.package else []
    for index in indexes:
        if not 0 <= index < len(messages):
            raise ValueError(f"no message at index {index} of {indexes}")
        names.append(messages[index].name)
        messages = list(messages[index].nested_type)
    return ".".join(names)


def message_class(schema: ProtobufSchema, indexes: list[int]) -> Any:
    """A message class for the indexed message of `schema` (pools cached per schema)."""
    key = (schema.text, tuple(sorted(schema.imports)))
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = _pool(schema)
    descriptor = pool.FindMessageTypeByName(message_name(schema.parsed, indexes))
    return message_factory.GetMessageClass(descriptor)


def _pool(schema: ProtobufSchema) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: pb.FileDescriptorProto) -> None:
        if file.name in added:
            return
        added.add(file.name)
        for name in file.dependency:
            found = schema.imports.get(name)
            add(found[1] if found is not None else compiler.builtin(name))
        pool.Add(file)

    add(schema.parsed)
    return pool
