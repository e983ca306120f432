"""ACLs and SCRAM credentials of a secured cluster, through a ClusterClient's admin, as
typed values.

    entries = describe_acls(client, AclFilter(principal="User:alice"))
    create_acl(client, AclEntry("User:alice", "*", "READ", "ALLOW", "TOPIC", "orders",
                                "LITERAL"))
    users = describe_scram_users(client)                 # [ScramUser], sorted by name
    upsert_scram_credential(client, "alice", "SCRAM-SHA-512", "secret", 8192)

Names are Kafka's (`kafka-acls`' and the AdminClient's enum names: TOPIC, PREFIXED, READ,
ALLOW, SCRAM-SHA-512), so what a page or a test says is what the broker stores. Kept apart
from client.py, as elections.py is, so the security pages' admin calls stay in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from clusterclient.client import ClusterClient
from clusterclient.errors import ClusterRequestError, result, translate

RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "USER")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
              "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
              "CREATE_TOKENS", "DESCRIBE_TOKENS")
PERMISSIONS = ("ALLOW", "DENY")
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's bounds for AlterUserScramCredentials (UNACCEPTABLE_CREDENTIAL outside them).
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
SECURITY_DISABLED = 54  # Kafka's error code: no authorizer on the cluster
T = TypeVar("T")


@dataclass(frozen=True)
class AclEntry:
    """One ACL binding: `principal` may (`permission` ALLOW) or may not (DENY) do
    `operation` from `host` on the resources `resource_type`/`resource_name` names
    (`pattern_type` LITERAL: that name, "*" for all; PREFIXED: names starting with it)."""

    principal: str
    host: str
    operation: str
    permission: str
    resource_type: str
    resource_name: str
    pattern_type: str

    def binding(self) -> AclBinding:
        return AclBinding(ResourceType[self.resource_type], self.resource_name,
                          ResourcePatternType[self.pattern_type], self.principal, self.host,
                          AclOperation[self.operation], AclPermissionType[self.permission])


@dataclass(frozen=True)
class AclFilter:
    """Which bindings to describe or delete: None matches any value of that field."""

    principal: str | None = None
    resource_type: str | None = None
    resource_name: str | None = None
    pattern_type: str | None = None  # LITERAL, PREFIXED, MATCH (names it would apply to)
    operation: str | None = None
    permission: str | None = None
    host: str | None = None

    def binding_filter(self) -> AclBindingFilter:
        return AclBindingFilter(
            ResourceType[self.resource_type or "ANY"], self.resource_name,
            ResourcePatternType[self.pattern_type or "ANY"], self.principal, self.host,
            AclOperation[self.operation or "ANY"], AclPermissionType[self.permission or "ANY"])


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int


@dataclass(frozen=True)
class ScramUser:
    name: str
    credentials: tuple[ScramCredential, ...]


def _entry(binding: AclBinding) -> AclEntry:
    return AclEntry(binding.principal, binding.host, binding.operation.name,
                    binding.permission_type.name, binding.restype.name, binding.name,
                    binding.resource_pattern_type.name)


def describe_acls(client: ClusterClient, matching: AclFilter | None = None) -> list[AclEntry]:
    """The bindings `matching` selects (all of them by default), sorted for listing."""
    future = _call(lambda: client.admin.describe_acls(
        (matching or AclFilter()).binding_filter(), request_timeout=client.timeout))
    found = result(future, client.timeout + 2.0)
    if not found:
        _require_authorizer(client)
    return sorted((_entry(b) for b in found),
                  key=lambda e: (e.principal, e.resource_type, e.resource_name,
                                 e.pattern_type, e.operation, e.permission, e.host))


def _require_authorizer(client: ClusterClient) -> None:
    """Raise SECURITY_DISABLED when the cluster runs no authorizer. Kafka answers
    DescribeAcls so then, but librdkafka drops that answer's top-level error code and
    hands back an empty list, as for a cluster with no ACLs. So an empty answer is checked
    against a broker's `authorizer.class.name` (DescribeConfigs): empty means no
    authorizer. A cluster that will not tell (no DESCRIBE_CONFIGS) keeps the empty list."""
    brokers = client.metadata().brokers
    if not brokers:
        return
    try:
        entries = client.broker_configs(brokers[0].node_id)
    except ClusterRequestError:
        return
    if any(e.name == "authorizer.class.name" and not e.value for e in entries):
        raise ClusterRequestError(SECURITY_DISABLED, "SECURITY_DISABLED",
                                  "No Authorizer is configured.")


def authorizer_enabled(client: ClusterClient) -> bool:
    """Whether the cluster runs an authorizer (False: DescribeAcls would answer
    SECURITY_DISABLED, CreateAcls too), by a broker's `authorizer.class.name`; a cluster
    that will not tell counts as having one."""
    try:
        _require_authorizer(client)
    except ClusterRequestError as exc:
        if exc.code != SECURITY_DISABLED:
            raise
        return False
    return True


def create_acl(client: ClusterClient, entry: AclEntry) -> None:
    """Create one binding; the broker's refusal (INVALID_REQUEST, ...) is raised."""
    futures = _call(lambda: client.admin.create_acls([entry.binding()],
                                                     request_timeout=client.timeout))
    for future in futures.values():
        result(future, client.timeout + 2.0)


def delete_acls(client: ClusterClient, matching: AclFilter) -> list[AclEntry]:
    """Delete every binding `matching` selects; the ones deleted."""
    futures = _call(lambda: client.admin.delete_acls([matching.binding_filter()],
                                                     request_timeout=client.timeout))
    deleted: list[AclEntry] = []
    for future in futures.values():
        deleted.extend(_entry(b) for b in result(future, client.timeout + 2.0))
    return deleted


def describe_scram_users(client: ClusterClient, users: Sequence[str] | None = None
                         ) -> list[ScramUser]:
    """Every SCRAM user (or the named ones) with their mechanisms and iterations; never a
    password or salt, which Kafka does not return. A named user without credentials
    raises RESOURCE_NOT_FOUND."""
    asked = list(users) if users else None
    answer = _call(lambda: client.admin.describe_user_scram_credentials(
        asked, request_timeout=client.timeout))
    found = ({u: result(f, client.timeout + 2.0) for u, f in answer.items()}
             if isinstance(answer, dict) else result(answer, client.timeout + 2.0))
    return sorted((ScramUser(name, tuple(
        ScramCredential(_mechanism_name(info.mechanism), int(info.iterations))
        for info in description.scram_credential_infos))
        for name, description in found.items()), key=lambda u: u.name)


def upsert_scram_credential(client: ClusterClient, user: str, mechanism: str, password: str,
                            iterations: int) -> None:
    """Create or replace `user`'s credential for `mechanism` (the broker salts and hashes
    the password; only the salted keys are stored)."""
    info = ScramCredentialInfo(_MECHANISMS[mechanism], iterations)
    _alter(client, UserScramCredentialUpsertion(user, info, password.encode()), user)


def delete_scram_credential(client: ClusterClient, user: str, mechanism: str) -> None:
    """Remove `user`'s credential for `mechanism`; RESOURCE_NOT_FOUND if there is none."""
    _alter(client, UserScramCredentialDeletion(user, _MECHANISMS[mechanism]), user)


_MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
               "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


def _mechanism_name(mechanism: ScramMechanism) -> str:
    return str(mechanism.name).replace("_", "-")


def _alter(client: ClusterClient, change: object, user: str) -> None:
    futures = _call(lambda: client.admin.alter_user_scram_credentials(
        [change], request_timeout=client.timeout))
    for future in futures.values():
        result(future, client.timeout + 2.0)


def _call(request: Callable[[], T]) -> T:
    """Run an admin call whose arguments confluent-kafka checks before sending (a bad enum
    or name raises at once), translating that refusal like a broker's."""
    try:
        return request()
    except KafkaException as exc:
        raise translate(exc) from exc
    except (ValueError, TypeError) as exc:
        raise ClusterRequestError(-186, "_INVALID_ARG", str(exc)) from exc
