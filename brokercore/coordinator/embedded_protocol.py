"""The consumer protocol's embedded messages, which classic groups carry as opaque bytes.

A classic consumer's JoinGroup metadata is a ConsumerProtocolSubscription and its SyncGroup
assignment a ConsumerProtocolAssignment. Kafka's coordinator reads them only where a group
moves between protocols and for classic members of a consumer group; so do we. Both are
non-flexible (int16 string lengths, int32 array lengths and byte lengths, -1 for null):

    Subscription v0: version int16, topics [string], user_data bytes?
                 v1: + owned_partitions [topic string, partitions [int32]]
                 v2: + generation_id int32;  v3: + rack_id string?
    Assignment   v0+: version int16, assigned_partitions [topic string, partitions [int32]],
                 user_data bytes?
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")

# topic name -> partitions
TopicPartitions = dict[str, frozenset[int]]


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned: TopicPartitions = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def more(self) -> bool:
        return self.pos < len(self.data)

    def fixed(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise ValueError("truncated")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def count(self) -> int:
        n = self.fixed(_I32)
        if n > len(self.data):
            raise ValueError("bad array length")
        return max(n, 0)

    def string(self) -> str:
        length = self.fixed(_I16)
        if length < 0 or self.pos + length > len(self.data):
            raise ValueError("bad string")
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        return raw.decode()

    def skip_bytes(self) -> None:
        length = self.fixed(_I32)
        if length > 0:
            self.pos += length

    def topic_partitions(self) -> TopicPartitions:
        result: dict[str, frozenset[int]] = {}
        for _ in range(self.count()):
            topic = self.string()
            result[topic] = frozenset(self.fixed(_I32) for _ in range(self.count()))
        return result


def decode_subscription(metadata: bytes) -> Subscription:
    """ValueError if it is not a ConsumerProtocolSubscription."""
    r = _Reader(metadata)
    version = r.fixed(_I16)
    topics = tuple(r.string() for _ in range(r.count()))
    r.skip_bytes()
    owned = r.topic_partitions() if version >= 1 and r.more() else {}
    return Subscription(topics, owned)


def decode_assignment(data: bytes) -> TopicPartitions:
    """The partitions of a ConsumerProtocolAssignment; empty bytes assign nothing."""
    if not data:
        return {}
    r = _Reader(data)
    r.fixed(_I16)
    return r.topic_partitions()


def encode_assignment(partitions: TopicPartitions) -> bytes:
    """A version 0 ConsumerProtocolAssignment without user data."""
    out = [_I16.pack(0), _I32.pack(len(partitions))]
    for topic, parts in sorted(partitions.items()):
        raw = topic.encode()
        out += [_I16.pack(len(raw)), raw, _I32.pack(len(parts))]
        out += [_I32.pack(p) for p in sorted(parts)]
    out.append(_I32.pack(-1))
    return b"".join(out)
