"""The StandardAuthorizer: whether a request's principal may do an operation on a resource.

Kafka 4.0's rules (`StandardAuthorizerData`), over the ACLs of the metadata image:

- a principal in `super.users` may do everything;
- an ACL applies when its pattern applies to the resource (LITERAL name, LITERAL `*`,
  PREFIXED by prefix), its principal is the request's or `User:*`, its host the peer's IP
  or `*`, and its operation the one asked, ALL, or (ALLOW only) one implying it;
- any applying DENY denies; otherwise any applying ALLOW allows;
- no applying ACL: denied, except that `allow.everyone.if.no.acl.found=true` allows when the
  resource has no ACL at all (for anyone). A resource with ACLs for others stays denied.

Without `authorizer.class.name` the authorizer is off and allows everything, as Kafka does.
Decisions are cached by (principal, host, operation, resource) until the ACLs change, so the
per-request cost is a dictionary lookup.
"""

from __future__ import annotations

import logging

from brokercore.config import BrokerConfig, ConfigError
from brokercore.protocol.context import RequestContext

from .acls import (
    CLUSTER_NAME,
    IMPLIED_BY_ALLOW,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBinding,
    AclIndex,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

log = logging.getLogger(__name__)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_NAMES = (STANDARD_AUTHORIZER, "StandardAuthorizer")
MAX_CACHED = 65536
WILDCARD_PRINCIPAL = "User:*"

_ALLOW, _DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
_ALL = AclOperation.ALL
_Key = tuple[str, str, AclOperation, ResourceType, str]


def authorizer_enabled(config: BrokerConfig) -> bool:
    """Whether `authorizer.class.name` names the StandardAuthorizer; ConfigError for any
    other class (a ZooKeeper-era AclAuthorizer, a custom one): better refused at start than
    silently open."""
    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return False
    if name not in AUTHORIZER_NAMES:
        raise ConfigError(f"Invalid value {name} for configuration authorizer.class.name: "
                          f"only {STANDARD_AUTHORIZER} is available")
    return True


def super_users(config: BrokerConfig) -> frozenset[str]:
    raw = config.get("super.users") or ""
    return frozenset(user.strip() for user in raw.split(";") if user.strip())


def peer_host(ctx: RequestContext) -> str:
    """The peer's IP address, from the context's "ip:port" (an IPv6 address keeps its colons)."""
    return ctx.peer.rsplit(":", 1)[0].strip("[]")


class Authorizer:
    def __init__(self, config: BrokerConfig, acls: AclIndex) -> None:
        self.enabled = authorizer_enabled(config)
        self.acls = acls
        self.super_users = super_users(config)
        self.allow_if_no_acl = config.get_bool("allow.everyone.if.no.acl.found")
        self._cache: dict[_Key, bool] = {}
        self._cache_version = -1

    @classmethod
    def off(cls) -> Authorizer:
        """An authorizer that allows everything (no `authorizer.class.name`)."""
        return cls(BrokerConfig({}), AclIndex())

    # -- decisions ------------------------------------------------------------------------
    def authorize(self, ctx: RequestContext, operation: AclOperation,
                  resource_type: ResourceType, name: str, *, audit: bool = True) -> bool:
        if not self.enabled:
            return True
        return self.allowed(ctx.principal, peer_host(ctx), operation, resource_type, name,
                            audit=audit)

    def authorize_cluster(self, ctx: RequestContext, operation: AclOperation, *,
                          audit: bool = True) -> bool:
        return self.authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, audit=audit)

    def authorize_topic(self, ctx: RequestContext, operation: AclOperation, name: str, *,
                        audit: bool = True) -> bool:
        return self.authorize(ctx, operation, ResourceType.TOPIC, name, audit=audit)

    def authorize_group(self, ctx: RequestContext, operation: AclOperation, name: str, *,
                        audit: bool = True) -> bool:
        return self.authorize(ctx, operation, ResourceType.GROUP, name, audit=audit)

    def authorize_transactional_id(self, ctx: RequestContext, operation: AclOperation,
                                   name: str, *, audit: bool = True) -> bool:
        return self.authorize(ctx, operation, ResourceType.TRANSACTIONAL_ID, name, audit=audit)

    def allowed(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str, *, audit: bool = True) -> bool:
        if self._cache_version != self.acls.version:
            self._cache.clear()
            self._cache_version = self.acls.version
        key = (principal, host, operation, resource_type, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[key] = decision
        if not decision and audit:
            log.info("Principal = %s is Denied operation = %s from host = %s on resource = "
                     "%s:%s", principal, operation.name, host,
                     resource_type.name.title().replace("_", ""), name)
        return decision

    def _decide(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        any_acl = allowed = False
        implied = IMPLIED_BY_ALLOW.get(operation)
        for acls in self.acls.applying_to(resource_type, name):
            any_acl = True
            for acl in acls:
                if acl.principal != principal and not _wildcard_principal(acl.principal):
                    continue
                if acl.host != host and acl.host != WILDCARD:
                    continue
                if acl.permission is _DENY:
                    if acl.operation is operation or acl.operation is _ALL:
                        return False
                elif (acl.operation is operation or acl.operation is _ALL
                      or (implied is not None and acl.operation in implied)):
                    allowed = True
        if allowed:
            return True
        return not any_acl and self.allow_if_no_acl

    def authorize_any(self, ctx: RequestContext, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether the principal may do `operation` on some resource of the type (Kafka's
        authorizeByResourceType, KIP-679: an idempotent producer may write to some topic):
        an ALLOW that no DENY of the principal covers (a LITERAL `*` or a shorter prefix
        or the same pattern)."""
        if not self.enabled:
            return True
        principal, host = ctx.principal, peer_host(ctx)
        # Kafka first asks about a name no ACL is meant for: a super user, or everyone
        # while nothing applies to it and allow.everyone.if.no.acl.found is on
        if self.allowed(principal, host, operation, resource_type, "hardcode", audit=False):
            return True
        acls = list(self.acls.of_type(resource_type))
        mine = [acl for acl in acls
                if (acl.principal == principal or _wildcard_principal(acl.principal))
                and acl.host in (host, WILDCARD)
                and (acl.operation is operation or acl.operation is _ALL)]
        denies = [acl for acl in mine if acl.permission is _DENY]
        return any(acl.permission is _ALLOW and not any(_covers(d, acl) for d in denies)
                   for acl in mine)

    def authorized_operations(self, ctx: RequestContext, resource_type: ResourceType,
                              name: str) -> frozenset[int]:
        """KIP-430's bitfield, as the set of its bits (bit n for operation code n): the
        operations the principal may do on the resource, of those its type supports."""
        return frozenset(
            int(operation) for operation in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(ctx, operation, resource_type, name, audit=False))


def bitfield(operations: frozenset[int]) -> int:
    """KIP-430's int32 bitfield of a set of operation codes."""
    return sum(1 << bit for bit in operations)


def _wildcard_principal(principal: str) -> bool:
    return principal == WILDCARD_PRINCIPAL


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether a DENY applies to every resource an ALLOW applies to."""
    if deny.pattern_type is PatternType.LITERAL:
        return deny.resource_name == WILDCARD or (
            allow.pattern_type is PatternType.LITERAL
            and deny.resource_name == allow.resource_name)
    return allow.resource_name.startswith(deny.resource_name)
