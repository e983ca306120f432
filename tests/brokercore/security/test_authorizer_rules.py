"""The StandardAuthorizer's rules, table-driven (Kafka 4.0's StandardAuthorizerTest cases).

Each row gives the ACLs in force, the question (principal, host, operation, resource) and
Kafka's answer. The ACLs go through the same records and image replay as on a broker.
"""

from __future__ import annotations

import pytest

from brokercore.config import BrokerConfig, ConfigError
from brokercore.controller.image import MetadataImage, acl_record
from brokercore.protocol.context import RequestContext
from brokercore.protocol.framing import RequestHeader
from brokercore.security.acls import (
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    new_acl,
    new_filter,
)
from brokercore.security.authorizer import Authorizer

T, G, C, X = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
              ResourceType.TRANSACTIONAL_ID)
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"
HOST = "10.0.0.1"


def acl(rtype: ResourceType, name: str, pattern: PatternType, principal: str, op: Op,
        perm: AclPermissionType = ALLOW, host: str = "*") -> tuple[object, ...]:
    return (rtype, name, pattern, principal, host, op, perm)


def authorizer(acls: list[tuple[object, ...]], **config: str) -> Authorizer:
    image = MetadataImage()
    for offset, fields in enumerate(acls):
        image.apply(acl_record(f"id-{offset}", new_acl(*fields)), offset)  # type: ignore[arg-type]
    props = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             **{k.replace("_", "."): v for k, v in config.items()}}
    return Authorizer(BrokerConfig(props), image.acls)


FOO_READ = [acl(T, "foo", LIT, ALICE, Op.READ)]
CASES = [
    # (id, ACLs, config, principal, host, operation, type, name, allowed)
    ("no acl: denied by default", [], {}, ALICE, HOST, Op.READ, T, "foo", False),
    ("literal allow", FOO_READ, {}, ALICE, HOST, Op.READ, T, "foo", True),
    ("literal: another principal", FOO_READ, {}, BOB, HOST, Op.READ, T, "foo", False),
    ("literal: not a prefix", FOO_READ, {}, ALICE, HOST, Op.READ, T, "foobar", False),
    ("literal: another operation", FOO_READ, {}, ALICE, HOST, Op.WRITE, T, "foo", False),
    ("literal: another resource type", FOO_READ, {}, ALICE, HOST, Op.READ, G, "foo", False),
    ("prefixed applies", [acl(T, "fo", PRE, ALICE, Op.READ)], {},
     ALICE, HOST, Op.READ, T, "foo", True),
    ("prefixed: shorter name", [acl(T, "fo", PRE, ALICE, Op.READ)], {},
     ALICE, HOST, Op.READ, T, "f", False),
    ("prefixed: equal name", [acl(T, "foo", PRE, ALICE, Op.READ)], {},
     ALICE, HOST, Op.READ, T, "foo", True),
    ("literal * is every name", [acl(T, "*", LIT, ALICE, Op.READ)], {},
     ALICE, HOST, Op.READ, T, "anything", True),
    ("prefixed * is only names starting with *", [acl(T, "*", PRE, ALICE, Op.READ)], {},
     ALICE, HOST, Op.READ, T, "anything", False),
    ("User:* is every principal", [acl(T, "foo", LIT, "User:*", Op.READ)], {},
     BOB, HOST, Op.READ, T, "foo", True),
    ("deny beats allow", [acl(T, "foo", LIT, ALICE, Op.ALL),
                          acl(T, "foo", LIT, ALICE, Op.READ, DENY)], {},
     ALICE, HOST, Op.READ, T, "foo", False),
    ("deny of READ leaves WRITE", [acl(T, "foo", LIT, ALICE, Op.ALL),
                                   acl(T, "foo", LIT, ALICE, Op.READ, DENY)], {},
     ALICE, HOST, Op.WRITE, T, "foo", True),
    ("prefixed deny ALL beats literal allow", [acl(T, "f", PRE, ALICE, Op.ALL, DENY),
                                               acl(T, "foo", LIT, ALICE, Op.READ)], {},
     ALICE, HOST, Op.READ, T, "foo", False),
    ("deny for User:* denies alice", [acl(T, "foo", LIT, ALICE, Op.READ),
                                      acl(T, "foo", LIT, "User:*", Op.READ, DENY)], {},
     ALICE, HOST, Op.READ, T, "foo", False),
    ("ALL allows every operation", [acl(T, "foo", LIT, ALICE, Op.ALL)], {},
     ALICE, HOST, Op.ALTER_CONFIGS, T, "foo", True),
    ("READ implies DESCRIBE", FOO_READ, {}, ALICE, HOST, Op.DESCRIBE, T, "foo", True),
    ("WRITE implies DESCRIBE", [acl(T, "foo", LIT, ALICE, Op.WRITE)], {},
     ALICE, HOST, Op.DESCRIBE, T, "foo", True),
    ("DELETE implies DESCRIBE", [acl(T, "foo", LIT, ALICE, Op.DELETE)], {},
     ALICE, HOST, Op.DESCRIBE, T, "foo", True),
    ("ALTER implies DESCRIBE", [acl(T, "foo", LIT, ALICE, Op.ALTER)], {},
     ALICE, HOST, Op.DESCRIBE, T, "foo", True),
    ("CREATE does not imply DESCRIBE", [acl(T, "foo", LIT, ALICE, Op.CREATE)], {},
     ALICE, HOST, Op.DESCRIBE, T, "foo", False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl(T, "foo", LIT, ALICE, Op.ALTER_CONFIGS)],
     {}, ALICE, HOST, Op.DESCRIBE_CONFIGS, T, "foo", True),
    ("READ does not imply DESCRIBE_CONFIGS", FOO_READ, {},
     ALICE, HOST, Op.DESCRIBE_CONFIGS, T, "foo", False),
    ("DESCRIBE implies nothing", [acl(T, "foo", LIT, ALICE, Op.DESCRIBE)], {},
     ALICE, HOST, Op.READ, T, "foo", False),
    ("a deny of READ does not deny DESCRIBE", [acl(T, "foo", LIT, ALICE, Op.DESCRIBE),
                                               acl(T, "foo", LIT, ALICE, Op.READ, DENY)], {},
     ALICE, HOST, Op.DESCRIBE, T, "foo", True),
    ("a deny of DESCRIBE is not implied away by an allow of READ",
     [acl(T, "foo", LIT, ALICE, Op.READ), acl(T, "foo", LIT, ALICE, Op.DESCRIBE, DENY)], {},
     ALICE, HOST, Op.DESCRIBE, T, "foo", False),
    ("host: the peer's IP", [acl(T, "foo", LIT, ALICE, Op.READ, host=HOST)], {},
     ALICE, HOST, Op.READ, T, "foo", True),
    ("host: another IP", [acl(T, "foo", LIT, ALICE, Op.READ, host=HOST)], {},
     ALICE, "10.0.0.2", Op.READ, T, "foo", False),
    ("super user: allowed without ACLs", [], {"super_users": "User:x;User:admin"},
     ADMIN, HOST, Op.ALTER, C, "kafka-cluster", True),
    ("super user: allowed despite a deny", [acl(T, "foo", LIT, ADMIN, Op.ALL, DENY)],
     {"super_users": "User:admin"}, ADMIN, HOST, Op.READ, T, "foo", True),
    ("allow everyone: a resource without ACLs", [acl(T, "foo", LIT, BOB, Op.READ)],
     {"allow_everyone_if_no_acl_found": "true"}, ALICE, HOST, Op.READ, T, "bar", True),
    ("allow everyone: a resource with others' ACLs stays denied",
     [acl(T, "foo", LIT, BOB, Op.READ)],
     {"allow_everyone_if_no_acl_found": "true"}, ALICE, HOST, Op.READ, T, "foo", False),
    ("allow everyone: a prefixed ACL counts as an ACL of the resource",
     [acl(T, "fo", PRE, BOB, Op.READ)],
     {"allow_everyone_if_no_acl_found": "true"}, ALICE, HOST, Op.READ, T, "foo", False),
    ("cluster", [acl(C, "kafka-cluster", LIT, ALICE, Op.CLUSTER_ACTION)], {},
     ALICE, HOST, Op.CLUSTER_ACTION, C, "kafka-cluster", True),
    ("transactional id, prefixed", [acl(X, "txn-", PRE, ALICE, Op.WRITE)], {},
     ALICE, HOST, Op.WRITE, X, "txn-1", True),
]


@pytest.mark.parametrize(("acls", "config", "principal", "host", "operation", "rtype",
                          "name", "allowed"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_kafka_rule(acls: list[tuple[object, ...]], config: dict[str, str], principal: str,
                    host: str, operation: Op, rtype: ResourceType, name: str,
                    allowed: bool) -> None:
    assert authorizer(acls, **config).allowed(principal, host, operation, rtype, name) is allowed


def test_without_authorizer_everything_is_allowed() -> None:
    off = Authorizer(BrokerConfig({}), MetadataImage().acls)
    assert not off.enabled
    assert Authorizer.off().enabled is False


def test_short_name_accepted_and_other_authorizers_refused() -> None:
    assert Authorizer(BrokerConfig({"authorizer.class.name": "StandardAuthorizer"}),
                      MetadataImage().acls).enabled
    legacy = BrokerConfig({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    with pytest.raises(ConfigError, match=r"authorizer\.class\.name"):
        Authorizer(legacy, MetadataImage().acls)


def test_a_removed_acl_stops_applying_at_once() -> None:
    image = MetadataImage()
    image.apply(acl_record("a", new_acl(*acl(T, "foo", LIT, ALICE, Op.READ))),  # type: ignore[arg-type]
                0)
    auth = Authorizer(BrokerConfig({"authorizer.class.name": "StandardAuthorizer"}), image.acls)
    assert auth.allowed(ALICE, HOST, Op.READ, T, "foo")  # cached now
    from brokercore.controller.records import RemoveAccessControlEntryRecord
    image.apply(RemoveAccessControlEntryRecord("a"), 1)
    assert not auth.allowed(ALICE, HOST, Op.READ, T, "foo")


def test_acls_survive_a_snapshot_of_the_image() -> None:
    image = MetadataImage()
    for offset, fields in enumerate([acl(T, "foo", LIT, ALICE, Op.READ),
                                     acl(G, "g-", PRE, BOB, Op.ALL, DENY, HOST)]):
        image.apply(acl_record(f"id{offset}", new_acl(*fields)), offset)  # type: ignore[arg-type]
    restored = MetadataImage()
    restored.load(image.records(), 5)
    assert restored.acls.by_id == image.acls.by_id


def test_many_acls_answer_the_same() -> None:
    """10,000 literal and prefixed ACLs of other principals and names change nothing."""
    acls = [acl(T, f"topic-{i}", LIT, f"User:u{i}", Op.WRITE) for i in range(5000)]
    acls += [acl(T, f"pre-{i}-", PRE, f"User:u{i}", Op.WRITE) for i in range(5000)]
    auth = authorizer([*acls, acl(T, "pre-7-", PRE, ALICE, Op.WRITE)])
    assert auth.allowed(ALICE, HOST, Op.WRITE, T, "pre-7-x")
    assert not auth.allowed(ALICE, HOST, Op.WRITE, T, "pre-8-x")
    assert auth.allowed("User:u42", HOST, Op.WRITE, T, "topic-42")
    assert not auth.allowed("User:u42", HOST, Op.WRITE, T, "topic-43")


@pytest.mark.parametrize(("fields", "message"), [
    ((T, "", LIT, ALICE, "*", Op.READ, ALLOW), "Resource name should not be empty"),
    ((C, "other", LIT, ALICE, "*", Op.ALTER, ALLOW), "kafka-cluster"),
    ((T, "foo", PatternType.MATCH, ALICE, "*", Op.READ, ALLOW), "Invalid patternType"),
    ((T, "foo", PatternType.ANY, ALICE, "*", Op.READ, ALLOW), "Invalid patternType"),
    ((ResourceType.ANY, "foo", LIT, ALICE, "*", Op.READ, ALLOW), "Invalid resourceType"),
    ((T, "foo", LIT, ALICE, "*", Op.ANY, ALLOW), "Invalid operation"),
    ((T, "foo", LIT, ALICE, "*", Op.READ, AclPermissionType.ANY), "Invalid permissionType"),
    ((T, "foo", LIT, "alice", "*", Op.READ, ALLOW), "Could not parse principal"),
    ((T, "foo", LIT, ALICE, "not-an-ip", Op.READ, ALLOW), "Invalid host"),
    ((T, "foo", LIT, ALICE, "*", 99, ALLOW), "Unknown operation"),
])
def test_bad_acls_are_refused(fields: tuple[object, ...], message: str) -> None:
    with pytest.raises(AclError, match=message):
        new_acl(*fields)  # type: ignore[arg-type]


def test_filters() -> None:
    foo = new_acl(T, "foo", LIT, ALICE, "*", Op.READ, ALLOW)
    star = new_acl(T, "*", LIT, BOB, "*", Op.WRITE, DENY)
    pre = new_acl(T, "fo", PRE, ALICE, HOST, Op.ALL, ALLOW)
    group = new_acl(G, "foo", LIT, ALICE, "*", Op.READ, ALLOW)
    every = [foo, star, pre, group]

    def select(*fields: object) -> list[object]:
        f = new_filter(*fields)  # type: ignore[arg-type]
        return [a for a in every if f.matches(a)]

    any_ = (Op.ANY, AclPermissionType.ANY)
    assert select(ResourceType.ANY, None, PatternType.ANY, None, None, *any_) == every
    assert select(T, None, PatternType.ANY, None, None, *any_) == [foo, star, pre]
    assert select(T, "foo", PatternType.ANY, None, None, *any_) == [foo]
    assert select(T, "foo", PatternType.MATCH, None, None, *any_) == [foo, star, pre]
    assert select(T, None, PRE, None, None, *any_) == [pre]
    assert select(ResourceType.ANY, None, PatternType.ANY, ALICE, HOST, *any_) == [pre]
    assert select(ResourceType.ANY, None, PatternType.ANY, None, None, Op.WRITE,
                  AclPermissionType.ANY) == [star]
    with pytest.raises(AclError):
        new_filter(ResourceType.UNKNOWN, None, PatternType.ANY, None, None, *any_)


ANY_CASES = [
    ("no acl", [], {}, False),
    ("no acl, allow everyone", [], {"allow_everyone_if_no_acl_found": "true"}, True),
    ("a literal allow", [acl(T, "foo", LIT, ALICE, Op.WRITE)], {}, True),
    ("ALL allows", [acl(T, "foo", LIT, ALICE, Op.ALL)], {}, True),
    ("another operation", [acl(T, "foo", LIT, ALICE, Op.READ)], {}, False),
    ("covered by a prefixed deny", [acl(T, "foo", LIT, ALICE, Op.WRITE),
                                    acl(T, "f", PRE, ALICE, Op.WRITE, DENY)], {}, False),
    ("a literal deny does not cover a prefix", [acl(T, "foo", PRE, ALICE, Op.WRITE),
                                                acl(T, "foo", LIT, ALICE, Op.WRITE, DENY)],
     {}, True),
    ("covered by a deny of *", [acl(T, "foo", LIT, ALICE, Op.WRITE),
                                acl(T, "*", LIT, "User:*", Op.WRITE, DENY)], {}, False),
    ("a super user", [acl(T, "*", LIT, ADMIN, Op.ALL, DENY)], {"super_users": ADMIN}, True),
]


@pytest.mark.parametrize(("acls", "config", "allowed"), [case[1:] for case in ANY_CASES],
                         ids=[case[0] for case in ANY_CASES])
def test_authorize_any_topic(acls: list[tuple[object, ...]], config: dict[str, str],
                             allowed: bool) -> None:
    """Kafka's authorizeByResourceType, which lets an idempotent producer with WRITE on
    some topic get a producer id (KIP-679)."""
    principal = ADMIN if "super_users" in config else ALICE
    ctx = RequestContext(RequestHeader(22, 4, 1, "test"), f"{HOST}:5000", principal=principal)
    assert authorizer(acls, **config).authorize_any(ctx, Op.WRITE, T) is allowed
