"""The metadata image: cluster state as the replay of metadata records.

Records are typed (`records.py`). The image changes only in `apply`; the controller decides
which records to write, and every broker builds the same image by replaying the same log
(Kafka's KRaft design).
"""

from __future__ import annotations

import copy
from base64 import b64decode, b64encode
from dataclasses import dataclass, field

from brokercore.security.acls import (
    AclBinding,
    AclIndex,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

from .records import (
    AccessControlEntryRecord,
    BrokerRecord,
    ClusterRecord,
    ConfigRecord,
    FenceBrokerRecord,
    Json,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)

Record = Json  # a record's JSON form, as the Raft log holds it (records.to_json)


@dataclass
class BrokerRegistration:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    epoch: int = 0
    incarnation: str = ""  # a new one per process start: tells a restart from a retry
    # Every advertised listener: name -> (host, port); host and port above are the
    # inter-broker listener's.
    endpoints: dict[str, tuple[str, int]] = field(default_factory=dict)

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where a client of `listener` reaches this broker; None if it has no such
        listener (Kafka then leaves the broker out). A registration without endpoints
        (written before they were recorded) has only the one."""
        if not self.endpoints:
            return self.host, self.port
        return self.endpoints.get(listener)


@dataclass(frozen=True)
class ScramCredentialImage:
    """One user's credential for one mechanism, as its record holds it (decoded)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # While a reassignment runs, `replicas` is the target plus the current replicas;
    # `adding_replicas` are target replicas not yet caught up, `removing_replicas` leave at
    # the end (KIP-455). Both empty when no reassignment is in progress.
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


@dataclass
class TopicImage:
    name: str
    topic_id: str
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


class MetadataImage:
    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[str, TopicImage] = {}
        # Dynamic broker configs by resource name: "" the cluster default, "<id>" one broker.
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Group configs (KIP-848) by group id.
        self.group_configs: dict[str, dict[str, str]] = {}
        self.producer_id_block_end = 0  # producer ids below this have been handed out
        # ACLs by record id; the authorizer looks them up here (the same object throughout)
        self.acls = AclIndex()
        # SCRAM credentials: user -> mechanism number (1, 2) -> credential
        self.scram_credentials: dict[str, dict[int, ScramCredentialImage]] = {}
        self.offset = -1  # the offset of the last applied record

    def apply(self, record: MetadataRecord, offset: int) -> None:
        match record:
            case ClusterRecord(cluster_id=cluster_id):
                self.cluster_id = cluster_id
            case BrokerRecord():
                self.brokers[record.node_id] = BrokerRegistration(
                    record.node_id, record.host, record.port, record.rack, record.fenced,
                    record.epoch, record.incarnation,
                    {name: (host, port) for name, host, port in record.endpoints},
                )
            case FenceBrokerRecord(node_id=node_id, fenced=fenced):
                self.brokers[node_id].fenced = fenced
            case TopicRecord(name=name, topic_id=topic_id):
                topic = TopicImage(name, topic_id)
                self.topics[name] = topic
                self.topics_by_id[topic_id] = topic
            case PartitionRecord():
                self.topics_by_id[record.topic_id].partitions[record.partition] = (
                    PartitionRegistration(
                        list(record.replicas), list(record.isr), record.leader,
                        record.leader_epoch, record.partition_epoch,
                        list(record.adding_replicas), list(record.removing_replicas),
                    ))
            case PartitionChangeRecord():
                self._change_partition(record)
            case RemoveTopicRecord(topic_id=topic_id):
                del self.topics[self.topics_by_id.pop(topic_id).name]
            case _:
                self._apply_settings(record)
        self.offset = offset

    def _apply_settings(self, record: MetadataRecord) -> None:
        """The records that are not the cluster's shape: producer ids, configs, ACLs and
        SCRAM credentials."""
        match record:
            case ProducerIdsRecord(block_end=block_end):
                self.producer_id_block_end = block_end
            case ConfigRecord():
                self._set_config(record)
            case AccessControlEntryRecord():
                self.acls.add(record.id, acl_of(record))
            case RemoveAccessControlEntryRecord(id=acl_id):
                self.acls.remove(acl_id)
            case UserScramCredentialRecord():
                self.scram_credentials.setdefault(record.name, {})[record.mechanism] = (
                    ScramCredentialImage(b64decode(record.salt), b64decode(record.stored_key),
                                         b64decode(record.server_key), record.iterations))
            case RemoveUserScramCredentialRecord(name=name, mechanism=mechanism):
                credentials = self.scram_credentials.get(name, {})
                credentials.pop(mechanism, None)
                if not credentials:
                    self.scram_credentials.pop(name, None)

    def records(self) -> list[MetadataRecord]:
        """Records that rebuild this image when applied to an empty one (a snapshot's)."""
        out: list[MetadataRecord] = []
        if self.cluster_id is not None:
            out.append(ClusterRecord(self.cluster_id))
        out += [BrokerRecord(b.node_id, b.host, b.port, b.rack, b.fenced, b.epoch, b.incarnation,
                             tuple((n, h, p) for n, (h, p) in b.endpoints.items()))
                for b in self.brokers.values()]
        out += [UserScramCredentialRecord(name, mechanism, b64encode(c.salt).decode(),
                                          b64encode(c.stored_key).decode(),
                                          b64encode(c.server_key).decode(), c.iterations)
                for name, by_mechanism in self.scram_credentials.items()
                for mechanism, c in by_mechanism.items()]
        if self.producer_id_block_end:
            out.append(ProducerIdsRecord(self.producer_id_block_end))
        out += [ConfigRecord("broker", name, key, value)
                for name, configs in self.broker_configs.items() for key, value in configs.items()]
        out += [ConfigRecord("group", name, key, value)
                for name, configs in self.group_configs.items() for key, value in configs.items()]
        for topic in self.topics.values():
            out.append(TopicRecord(topic.name, topic.topic_id))
            out += [PartitionRecord(topic.topic_id, index, tuple(p.replicas), tuple(p.isr),
                                    p.leader, p.leader_epoch, p.partition_epoch,
                                    tuple(p.adding_replicas), tuple(p.removing_replicas))
                    for index, p in topic.partitions.items()]
            out += [ConfigRecord("topic", topic.name, key, value)
                    for key, value in topic.configs.items()]
        out += [acl_record(acl_id, acl) for acl_id, acl in self.acls.by_id.items()]
        return out

    def load(self, records: list[MetadataRecord], offset: int) -> None:
        """Become the image `records` build (a snapshot's), in place: the dicts others
        hold (the broker's dynamic configs) stay the same objects."""
        self.cluster_id = None
        self.brokers.clear()
        self.topics.clear()
        self.topics_by_id.clear()
        self.broker_configs.clear()
        self.group_configs.clear()
        self.scram_credentials.clear()
        self.producer_id_block_end = 0
        self.acls.clear()
        for record in records:
            self.apply(record, offset)
        self.offset = offset

    def copy(self) -> MetadataImage:
        return copy.deepcopy(self)

    def _change_partition(self, r: PartitionChangeRecord) -> None:
        part = self.topics_by_id[r.topic_id].partitions[r.partition]
        if r.replicas is not None:
            part.replicas = list(r.replicas)
        if r.isr is not None:
            part.isr = list(r.isr)
        if r.leader is not None:
            part.leader = r.leader
        if r.leader_epoch is not None:
            part.leader_epoch = r.leader_epoch
        if r.adding_replicas is not None:
            part.adding_replicas = list(r.adding_replicas)
        if r.removing_replicas is not None:
            part.removing_replicas = list(r.removing_replicas)
        part.partition_epoch += 1

    def _set_config(self, r: ConfigRecord) -> None:
        if r.resource == "topic":
            configs = self.topics[r.name].configs
        elif r.resource == "group":
            configs = self.group_configs.setdefault(r.name, {})
        else:
            configs = self.broker_configs.setdefault(r.name, {})
        if r.value is None:
            configs.pop(r.key, None)
            if not configs and r.resource == "group":
                del self.group_configs[r.name]
        else:
            configs[r.key] = r.value


def acl_of(r: AccessControlEntryRecord) -> AclBinding:
    return AclBinding(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type),
                      r.principal, r.host, AclOperation(r.operation),
                      AclPermissionType(r.permission_type))


def acl_record(acl_id: str, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id, int(acl.resource_type), acl.resource_name, int(acl.pattern_type),
        acl.principal, acl.host, int(acl.operation), int(acl.permission))
