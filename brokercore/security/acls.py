"""Access control lists: Kafka's ACL model, its validation and filters, and the index the
authorizer looks ACLs up in.

An ACL (`AclBinding`) names a resource pattern (type, name, LITERAL or PREFIXED), a
principal (`User:alice`, `User:*` for everyone), a host (an IP address or `*`), an operation
and ALLOW or DENY; the enum codes are Kafka's wire codes. ACLs live in the metadata log
(`AccessControlEntryRecord`, `controller/records.py`); the image keeps them in an `AclIndex`,
which finds the ACLs that apply to one resource with dictionary lookups only: the literal
name, the literal wildcard `*` and each prefix length that some PREFIXED ACL has. So a
lookup costs the same with ten ACLs as with ten thousand.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource (KIP-140)
WILDCARD = "*"  # a LITERAL name, principal name or host that matches every one

Op = AclOperation
# The operations that make sense on each resource type (Kafka's AclEntry.supportedOperations):
# what KIP-430's authorized-operations bitfields are computed over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}

# An ALLOW of the key also allows these (Kafka: READ, WRITE, DELETE and ALTER imply DESCRIBE;
# ALTER_CONFIGS implies DESCRIBE_CONFIGS). A DENY implies nothing.
IMPLIED_BY_ALLOW: dict[AclOperation, frozenset[AclOperation]] = {
    Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL}),
    Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL}),
}


class AclError(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: ANY (and None for a name, principal or
    host) matches every value; pattern MATCH selects the ACLs that apply to the name."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    def matches(self, acl: AclBinding) -> bool:
        return (self._matches_resource(acl)
                and self.principal in (None, acl.principal)
                and self.host in (None, acl.host)
                and self.operation in (Op.ANY, acl.operation)
                and self.permission in (AclPermissionType.ANY, acl.permission))

    def _matches_resource(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type is PatternType.MATCH and self.resource_name is not None:
            return pattern_applies(acl.pattern_type, acl.resource_name, self.resource_name)
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        return self.resource_name in (None, acl.resource_name)


def pattern_applies(pattern_type: PatternType, pattern: str, name: str) -> bool:
    """Whether an ACL on (pattern_type, pattern) applies to the resource called `name`."""
    if pattern_type is PatternType.LITERAL:
        return pattern in (name, WILDCARD)
    return pattern_type is PatternType.PREFIXED and name.startswith(pattern)


def _enum(cls: type[IntEnum], code: int, what: str) -> IntEnum:
    try:
        return cls(code)
    except ValueError:
        raise AclError(f"Unknown {what} {code}") from None


def new_acl(resource_type: int, resource_name: str | None, pattern_type: int, principal: str,
            host: str, operation: int, permission: int) -> AclBinding:
    """An ACL to create, checked as Kafka checks CreateAcls' entries (AclError if not)."""
    rtype = ResourceType(_enum(ResourceType, resource_type, "resource type"))
    pattern = PatternType(_enum(PatternType, pattern_type, "pattern type"))
    op = AclOperation(_enum(AclOperation, operation, "operation"))
    perm = AclPermissionType(_enum(AclPermissionType, permission, "permission type"))
    if rtype in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise AclError(f"Invalid resourceType {rtype.name}")
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid patternType {pattern.name}")
    if op in (Op.ANY, Op.UNKNOWN):
        raise AclError(f"Invalid operation {op.name}")
    if perm not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclError(f"Invalid permissionType {perm.name}")
    if not resource_name:
        raise AclError("Resource name should not be empty")
    if rtype is ResourceType.CLUSTER and resource_name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not principal or ":" not in principal:
        raise AclError(f"Could not parse principal from `{principal}` (no colon is present "
                       "separating the principal type from the principal name)")
    if host != WILDCARD:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise AclError(f"Invalid host address {host!r}: only IP addresses and * "
                           "are allowed") from None
    return AclBinding(rtype, resource_name, pattern, principal, host, op, perm)


def new_filter(resource_type: int, resource_name: str | None, pattern_type: int,
               principal: str | None, host: str | None, operation: int,
               permission: int) -> AclFilter:
    """A DescribeAcls/DeleteAcls filter; AclError for UNKNOWN values, as Kafka refuses."""
    rtype = ResourceType(_enum(ResourceType, resource_type, "resource type"))
    pattern = PatternType(_enum(PatternType, pattern_type, "pattern type"))
    op = AclOperation(_enum(AclOperation, operation, "operation"))
    perm = AclPermissionType(_enum(AclPermissionType, permission, "permission type"))
    if ResourceType.UNKNOWN is rtype or PatternType.UNKNOWN is pattern \
            or Op.UNKNOWN is op or AclPermissionType.UNKNOWN is perm:
        raise AclError("The filter's fields must not be UNKNOWN")
    return AclFilter(rtype, resource_name, pattern, principal, host, op, perm)


@dataclass
class _TypeIndex:
    """The ACLs of one resource type: by literal name and by prefix."""

    literal: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefix_lengths: Counter[int] = field(default_factory=Counter)
    lengths: tuple[int, ...] = ()  # prefix_lengths' keys, sorted, for the lookups

    def add(self, acl: AclBinding) -> None:
        if acl.pattern_type is PatternType.LITERAL:
            self.literal.setdefault(acl.resource_name, []).append(acl)
            return
        self.prefixed.setdefault(acl.resource_name, []).append(acl)
        self.prefix_lengths[len(acl.resource_name)] += 1
        self.lengths = tuple(sorted(self.prefix_lengths))

    def remove(self, acl: AclBinding) -> None:
        table = self.literal if acl.pattern_type is PatternType.LITERAL else self.prefixed
        acls = table[acl.resource_name]
        acls.remove(acl)
        if not acls:
            del table[acl.resource_name]
        if acl.pattern_type is PatternType.PREFIXED:
            self.prefix_lengths[len(acl.resource_name)] -= 1
            if not self.prefix_lengths[len(acl.resource_name)]:
                del self.prefix_lengths[len(acl.resource_name)]
                self.lengths = tuple(sorted(self.prefix_lengths))

    def applying_to(self, name: str) -> Iterator[list[AclBinding]]:
        """The lists of ACLs whose pattern applies to `name`."""
        for key in (name, WILDCARD):
            acls = self.literal.get(key)
            if acls:
                yield acls
                if name == WILDCARD:
                    break
        for length in self.lengths:
            if length > len(name):
                break
            acls = self.prefixed.get(name[:length])
            if acls:
                yield acls


class AclIndex:
    """Every ACL of the cluster by its id (the record's), indexed for the authorizer.

    `version` grows with each change, so a cache of decisions knows when it is stale.
    """

    def __init__(self) -> None:
        self.by_id: dict[str, AclBinding] = {}
        self._ids: dict[AclBinding, str] = {}
        self._types: dict[ResourceType, _TypeIndex] = {}
        self.version = 0

    def __len__(self) -> int:
        return len(self.by_id)

    def id_of(self, acl: AclBinding) -> str | None:
        return self._ids.get(acl)

    def add(self, acl_id: str, acl: AclBinding) -> None:
        if acl_id in self.by_id or acl in self._ids:
            return  # replaying a record twice (a snapshot and its log) changes nothing
        self.by_id[acl_id] = acl
        self._ids[acl] = acl_id
        self._types.setdefault(acl.resource_type, _TypeIndex()).add(acl)
        self.version += 1

    def remove(self, acl_id: str) -> None:
        acl = self.by_id.pop(acl_id, None)
        if acl is None:
            return
        del self._ids[acl]
        self._types[acl.resource_type].remove(acl)
        self.version += 1

    def clear(self) -> None:
        self.by_id.clear()
        self._ids.clear()
        self._types.clear()
        self.version += 1

    def applying_to(self, resource_type: ResourceType, name: str) -> Iterator[list[AclBinding]]:
        index = self._types.get(resource_type)
        return index.applying_to(name) if index is not None else iter(())

    def of_type(self, resource_type: ResourceType) -> Iterable[AclBinding]:
        index = self._types.get(resource_type)
        if index is None:
            return ()
        return [acl for table in (index.literal, index.prefixed)
                for acls in table.values() for acl in acls]

    def matching(self, acl_filter: AclFilter) -> list[tuple[str, AclBinding]]:
        """(id, ACL) of every ACL the filter selects."""
        return [(acl_id, acl) for acl_id, acl in self.by_id.items() if acl_filter.matches(acl)]
