"""The `__consumer_offsets` records of KIP-848 consumer groups, in Kafka's layout.

Keys are an int16 key version and plain (non-flexible) fields; values an int16 value
version (0) and flexible fields (compact strings and arrays, 16-byte uuids, tagged fields).
A null value is a tombstone.

    3 ConsumerGroupMetadata               group       -> epoch int32
    5 ConsumerGroupMemberMetadata         group, member -> instance_id?, rack_id?,
          client_id, client_host, subscribed_topic_names [], subscribed_topic_regex?,
          rebalance_timeout_ms int32, server_assignor?, tag 0: classic_member_metadata
          (session_timeout_ms int32, supported_protocols [name, metadata]), for a
          member of the classic protocol
    6 ConsumerGroupTargetAssignmentMetadata group     -> assignment_epoch int32
    7 ConsumerGroupTargetAssignmentMember   group, member -> [topic_id uuid, [int32]]
    8 ConsumerGroupCurrentMemberAssignment  group, member -> member_epoch int32,
          previous_member_epoch int32, state int8, assigned [..], pending_revocation [..]

    4 ConsumerGroupPartitionMetadata       group       -> topics [topic_id uuid, name,
          num_partitions int32, partition_metadata [partition int32, racks []]]: the
          subscribed topics the group epoch was computed with (racks are not kept: empty)

Key 4 is written whenever the subscribed topics change, so a coordinator that loads the
group compares the metadata image with what the group last saw, as Kafka's does, and does
not bump the group epoch after a failover.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from .consumer_group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from .reconciliation import MemberAssignment

GROUP_EPOCH_KEY = 3
SUBSCRIPTION_METADATA_KEY = 4
MEMBER_METADATA_KEY = 5
TARGET_EPOCH_KEY = 6
TARGET_MEMBER_KEY = 7
CURRENT_ASSIGNMENT_KEY = 8
CONSUMER_KEYS = frozenset({3, 4, 5, 6, 7, 8})

_I16, _I32, _I8 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">b")


@dataclass(frozen=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


# topic name -> (topic id, partition count)
SubscribedTopics = dict[str, tuple[str, int]]


@dataclass(frozen=True)
class SubscriptionMetadata:
    """Key 4's value: the subscribed topics' metadata the group epoch was computed with."""

    topics: SubscribedTopics


ConsumerValue = int | MemberMetadata | Assignment | MemberAssignment | SubscriptionMetadata


@dataclass(frozen=True)
class ConsumerRecord:
    key_version: int
    group_id: str
    member_id: str | None
    value: ConsumerValue | None  # None: a tombstone


# -- keys ---------------------------------------------------------------------------------
def _key_str(value: str) -> bytes:
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    out = _I16.pack(version) + _key_str(group_id)
    return out + _key_str(member_id) if member_id is not None else out


def group_tombstones(group_id: str) -> list[tuple[bytes, bytes | None]]:
    """A deleted or converted group's own records (keys 4, 6 and 3; its offsets are apart)."""
    return [(key(version, group_id), None) for version in
            (SUBSCRIPTION_METADATA_KEY, TARGET_EPOCH_KEY, GROUP_EPOCH_KEY)]


def member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, bytes | None]]:
    """A member that left: its assignment, its target and its metadata (keys 8, 7, 5)."""
    return [(key(version, group_id, member_id), None) for version in
            (CURRENT_ASSIGNMENT_KEY, TARGET_MEMBER_KEY, MEMBER_METADATA_KEY)]


# -- flexible values ----------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstr(value: str | None) -> bytes:
    if value is None:
        return _uvarint(0)
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


def _partitions(assignment: Assignment) -> bytes:
    out = [_uvarint(len(assignment) + 1)]
    for topic_id, parts in sorted(assignment.items()):
        out += [uuid.UUID(topic_id).bytes, _uvarint(len(parts) + 1),
                b"".join(_I32.pack(p) for p in sorted(parts)), _uvarint(0)]
    return b"".join(out)


_NO_TAGS = _uvarint(0)
_V0 = _I16.pack(0)


def epoch_value(epoch: int) -> bytes:
    return _V0 + _I32.pack(epoch) + _NO_TAGS


def _cbytes(value: bytes) -> bytes:
    return _uvarint(len(value) + 1) + value


def _classic_tag(classic: ClassicMemberMetadata | None) -> bytes:
    """The tagged fields: tag 0, ClassicMemberMetadata, when the member is classic."""
    if classic is None:
        return _NO_TAGS
    protocols = _uvarint(len(classic.protocols) + 1) + b"".join(
        _cstr(name) + _cbytes(metadata) + _NO_TAGS for name, metadata in classic.protocols)
    struct_ = _I32.pack(classic.session_timeout_ms) + protocols + _NO_TAGS
    return _uvarint(1) + _uvarint(0) + _uvarint(len(struct_)) + struct_


def member_value(m: MemberMetadata) -> bytes:
    names = _uvarint(len(m.subscribed_topic_names) + 1) + b"".join(
        _cstr(n) for n in m.subscribed_topic_names)
    return b"".join([_V0, _cstr(m.instance_id), _cstr(m.rack_id), _cstr(m.client_id),
                     _cstr(m.client_host), names, _cstr(m.subscribed_topic_regex),
                     _I32.pack(m.rebalance_timeout_ms), _cstr(m.server_assignor),
                     _classic_tag(m.classic)])


def subscription_metadata_value(topics: SubscribedTopics) -> bytes:
    out = [_V0, _uvarint(len(topics) + 1)]
    for name, (topic_id, partitions) in sorted(topics.items()):
        out += [uuid.UUID(topic_id).bytes, _cstr(name), _I32.pack(partitions),
                _uvarint(1), _NO_TAGS]  # no partition metadata (racks)
    return b"".join([*out, _NO_TAGS])


def target_value(assignment: Assignment) -> bytes:
    return _V0 + _partitions(assignment) + _NO_TAGS


def current_value(a: MemberAssignment) -> bytes:
    return b"".join([_V0, _I32.pack(a.member_epoch), _I32.pack(a.previous_member_epoch),
                     _I8.pack(int(a.state)), _partitions(a.assigned),
                     _partitions(a.pending_revocation), _NO_TAGS])


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def fixed(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def key_str(self) -> str:
        length = self.fixed(_I16)
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        return raw.decode()

    def cstr(self) -> str | None:
        length = self.uvarint() - 1
        if length < 0:
            return None
        raw = self.data[self.pos:self.pos + length]
        if len(raw) != length:
            raise ValueError("truncated string")
        self.pos += length
        return raw.decode()

    def partitions(self) -> Assignment:
        result: Assignment = {}
        for _ in range(self.uvarint() - 1):
            topic_id = str(uuid.UUID(bytes=self.data[self.pos:self.pos + 16]))
            self.pos += 16
            result[topic_id] = frozenset(self.fixed(_I32) for _ in range(self.uvarint() - 1))
            self.skip_tags()
        return result

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def cbytes(self) -> bytes:
        length = self.uvarint() - 1
        raw = self.data[self.pos:self.pos + max(length, 0)]
        self.pos += max(length, 0)
        return raw

    def classic_tag(self) -> ClassicMemberMetadata | None:
        """Tag 0 (ClassicMemberMetadata) among the tagged fields; others are skipped."""
        found = None
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            end = self.pos + size
            if tag == 0:
                session_timeout_ms = self.fixed(_I32)
                protocols = []
                for _ in range(self.uvarint() - 1):
                    name, metadata = self.cstr() or "", self.cbytes()
                    self.skip_tags()
                    protocols.append((name, metadata))
                found = ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
            self.pos = end
        return found


def _member_metadata(r: _Reader) -> MemberMetadata:
    instance, rack, client_id, host = r.cstr(), r.cstr(), r.cstr() or "", r.cstr() or ""
    names = tuple(r.cstr() or "" for _ in range(r.uvarint() - 1))
    regex, rebalance_timeout_ms, assignor = r.cstr(), r.fixed(_I32), r.cstr()
    return MemberMetadata(instance, rack, client_id, host, names, regex, rebalance_timeout_ms,
                          assignor, r.classic_tag())


def _subscribed_topics(r: _Reader) -> SubscribedTopics:
    topics: SubscribedTopics = {}
    for _ in range(r.uvarint() - 1):
        topic_id = str(uuid.UUID(bytes=r.data[r.pos:r.pos + 16]))
        r.pos += 16
        name, partitions = r.cstr() or "", r.fixed(_I32)
        for _ in range(r.uvarint() - 1):  # partition metadata: partition, racks
            r.fixed(_I32)
            for _ in range(r.uvarint() - 1):
                r.cstr()
            r.skip_tags()
        r.skip_tags()
        topics[name] = (topic_id, partitions)
    return topics


def _current(r: _Reader) -> MemberAssignment:
    epoch, previous, state = r.fixed(_I32), r.fixed(_I32), r.fixed(_I8)
    known = state in MemberState._value2member_map_
    return MemberAssignment(epoch, previous, MemberState(state) if known else
                            MemberState.UNKNOWN, r.partitions(), r.partitions())


def decode(version: int, key_data: bytes, value: bytes | None) -> ConsumerRecord | None:
    """The record under a consumer-group key version (3 to 8)."""
    r = _Reader(key_data)
    r.pos = 2
    group_id = r.key_str()
    member_id = r.key_str() if version in (5, 7, 8) else None
    if value is None:
        return ConsumerRecord(version, group_id, member_id, None)
    v = _Reader(value)
    v.pos = 2
    decoded: ConsumerValue
    if version in (GROUP_EPOCH_KEY, TARGET_EPOCH_KEY):
        decoded = v.fixed(_I32)
    elif version == SUBSCRIPTION_METADATA_KEY:
        decoded = SubscriptionMetadata(_subscribed_topics(v))
    elif version == MEMBER_METADATA_KEY:
        decoded = _member_metadata(v)
    elif version == TARGET_MEMBER_KEY:
        decoded = v.partitions()
    else:
        decoded = _current(v)
    return ConsumerRecord(version, group_id, member_id, decoded)


# -- replay -------------------------------------------------------------------------------
def replay(groups: dict[str, ConsumerGroup], record: ConsumerRecord, partition: int) -> None:
    """Apply one record, in log order, to the consumer groups being loaded. A group whose
    epoch record is tombstoned ends `dead` (deleted, or turned into a classic group)."""
    group = groups.get(record.group_id)
    if group is None or (group.dead and record.value is not None):
        group = groups[record.group_id] = ConsumerGroup(record.group_id, partition)
    if record.member_id is None:
        _replay_group(group, record)
        return
    member = group.members.get(record.member_id)
    if record.value is None:
        if record.key_version == TARGET_MEMBER_KEY:
            group.target.pop(record.member_id, None)
        elif record.key_version == MEMBER_METADATA_KEY:
            group.remove_member(record.member_id)
        return
    if member is None:
        member = ConsumerMember(record.member_id)
        group.add_member(member)
    _replay_member(group, member, record.value)


def _replay_group(group: ConsumerGroup, record: ConsumerRecord) -> None:
    if record.value is None:
        if record.key_version == GROUP_EPOCH_KEY:
            group.dead = True
        elif record.key_version == SUBSCRIPTION_METADATA_KEY:
            group.subscribed_topics = {}
        return
    if isinstance(record.value, SubscriptionMetadata):
        group.subscribed_topics = dict(record.value.topics)
        return
    assert isinstance(record.value, int)
    if record.key_version == GROUP_EPOCH_KEY:
        group.group_epoch = record.value
    else:
        group.assignment_epoch = record.value


def _replay_member(group: ConsumerGroup, member: ConsumerMember, value: ConsumerValue) -> None:
    if isinstance(value, MemberMetadata):
        member.instance_id, member.rack_id = value.instance_id, value.rack_id
        member.client_id, member.client_host = value.client_id, value.client_host
        member.subscribed_topic_names = value.subscribed_topic_names
        member.subscribed_topic_regex = value.subscribed_topic_regex
        member.rebalance_timeout_ms = value.rebalance_timeout_ms
        member.server_assignor = value.server_assignor
        member.classic = value.classic
        if value.instance_id is not None:
            group.static_members[value.instance_id] = member.member_id
    elif isinstance(value, MemberAssignment):
        member.member_epoch, member.previous_member_epoch = (value.member_epoch,
                                                             value.previous_member_epoch)
        member.state, member.assigned = value.state, value.assigned
        member.pending_revocation = value.pending_revocation
    elif isinstance(value, dict):
        group.target[member.member_id] = value
