"""Metadata records: one frozen dataclass per record type, and their JSON form in the log.

The Raft log stores each record as one JSON object: `{"type": T, "version": V, ...fields}`
(`to_json`). `from_json` reads it back into the record's class; a record written before
versions existed has no "version" and reads as version 0. A version newer than the class's
`VERSION` is refused (a newer broker wrote it), never half read. Lists are stored as JSON
arrays and held as tuples, so a record cannot change after it is written.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

Json = dict[str, Any]


class RecordError(ValueError):
    """A JSON object in the metadata log that is not a record this broker can read."""


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    TYPE: ClassVar[str] = "cluster"
    VERSION: ClassVar[int] = 0
    cluster_id: str


@dataclass(frozen=True, slots=True)
class BrokerRecord:
    """A broker's registration; `incarnation` is new per process start (a restart, not a
    retry)."""

    TYPE: ClassVar[str] = "broker"
    VERSION: ClassVar[int] = 0
    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    epoch: int = 0
    incarnation: str = ""
    # Every advertised listener as (name, host, port); host and port above are the
    # inter-broker listener's. Empty in records written before listeners were recorded.
    endpoints: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    TYPE: ClassVar[str] = "fence_broker"
    VERSION: ClassVar[int] = 0
    node_id: int
    fenced: bool


@dataclass(frozen=True, slots=True)
class TopicRecord:
    TYPE: ClassVar[str] = "topic"
    VERSION: ClassVar[int] = 0
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    TYPE: ClassVar[str] = "partition"
    VERSION: ClassVar[int] = 0
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """The fields of a partition that change; None keeps the current value. Replaying it
    always bumps `partition_epoch`."""

    TYPE: ClassVar[str] = "partition_change"
    VERSION: ClassVar[int] = 0
    topic_id: str
    partition: int
    replicas: tuple[int, ...] | None = None
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    leader_epoch: int | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    TYPE: ClassVar[str] = "remove_topic"
    VERSION: ClassVar[int] = 0
    topic_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """Producer ids below `block_end` have been handed out (KRaft's ProducerIdsRecord)."""

    TYPE: ClassVar[str] = "producer_ids"
    VERSION: ClassVar[int] = 0
    block_end: int


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """One config key of a topic (`resource` "topic", `name` the topic), a dynamic broker
    config ("broker", `name` "" for the cluster-wide default or a node id) or a group's
    config ("group", `name` the group id); a None value removes the override."""

    TYPE: ClassVar[str] = "config"
    VERSION: ClassVar[int] = 0
    resource: str
    name: str
    key: str
    value: str | None


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL (KRaft's AccessControlEntryRecord); the enums are Kafka's wire codes
    (`security/acls.py`) and `id` names it for its removal."""

    TYPE: ClassVar[str] = "access_control_entry"
    VERSION: ClassVar[int] = 0
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    TYPE: ClassVar[str] = "remove_access_control_entry"
    VERSION: ClassVar[int] = 0
    id: str


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord):
    what the server side of the exchange needs, never the password nor the salted
    password. `mechanism` is 1 SCRAM-SHA-256 or 2 SCRAM-SHA-512; the byte fields are
    base64."""

    TYPE: ClassVar[str] = "user_scram_credential"
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    TYPE: ClassVar[str] = "remove_user_scram_credential"
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int


MetadataRecord = (
    ClusterRecord | BrokerRecord | FenceBrokerRecord | TopicRecord | PartitionRecord
    | PartitionChangeRecord | RemoveTopicRecord | ProducerIdsRecord | ConfigRecord
    | AccessControlEntryRecord | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord | RemoveUserScramCredentialRecord
)

RECORD_TYPES: dict[str, type[MetadataRecord]] = {
    cls.TYPE: cls for cls in (
        ClusterRecord, BrokerRecord, FenceBrokerRecord, TopicRecord, PartitionRecord,
        PartitionChangeRecord, RemoveTopicRecord, ProducerIdsRecord, ConfigRecord,
        AccessControlEntryRecord, RemoveAccessControlEntryRecord,
        UserScramCredentialRecord, RemoveUserScramCredentialRecord,
    )
}


def to_json(record: MetadataRecord) -> Json:
    """The record as written to the log; a change's unchanged (None) fields are left out."""
    fields: Json = {"type": record.TYPE, "version": record.VERSION}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if value is None and isinstance(record, PartitionChangeRecord):
            continue
        fields[f.name] = _json_value(value)
    return fields


def _json_value(value: Any) -> Any:
    return [_json_value(item) for item in value] if isinstance(value, tuple) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


def from_json(raw: Json) -> MetadataRecord:
    """The record a JSON object of the log holds; RecordError if it is not one we know."""
    cls = RECORD_TYPES.get(raw.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise RecordError(f"unknown metadata record type {raw.get('type')!r}")
    version = raw.get("version", 0)
    if not isinstance(version, int) or not 0 <= version <= cls.VERSION:
        raise RecordError(f"{cls.TYPE} record version {version!r} is newer than "
                          f"this broker reads (up to {cls.VERSION})")
    names = {f.name for f in dataclasses.fields(cls)}
    args: Json = {k: _tuples(v) for k, v in raw.items() if k in names}
    try:
        return cls(**args)
    except TypeError as exc:
        raise RecordError(f"malformed {cls.TYPE} record {raw!r}: {exc}") from None
