"""confluent-kafka's admin ACL calls and KIP-430 authorized operations, as its own
integration suite uses them: against a broker configured as its test clusters are
(StandardAuthorizer, `super.users=User:admin`, `allow.everyone.if.no.acl.found=true`), the
client being User:ANONYMOUS over PLAINTEXT."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.brokerproc import BrokerProcess

ME = "User:ANONYMOUS"
TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                    AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
EVERY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("acl-compat"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true",
        "offsets.topic.replication.factor": "1",
    }).start()
    yield process
    process.kill()


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[AdminClient]:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    yield client
    client.delete_acls([EVERY_ACL])[EVERY_ACL].result()  # each test starts with none


def binding(rtype: ResourceType, name: str, pattern: ResourcePatternType, principal: str,
            op: AclOperation, perm: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def test_create_describe_delete_acls(admin: AdminClient) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic_literal = binding(ResourceType.TOPIC, f"t-{suffix}", ResourcePatternType.LITERAL,
                            "User:test-user-1", AclOperation.READ)
    topic_prefixed = binding(ResourceType.TOPIC, f"t-{suffix}", ResourcePatternType.PREFIXED,
                             "User:test-user-2", AclOperation.WRITE, AclPermissionType.DENY)
    group = binding(ResourceType.GROUP, f"g-{suffix}", ResourcePatternType.PREFIXED,
                    "User:test-user-2", AclOperation.ALL)
    created = admin.create_acls([topic_literal, topic_prefixed, group])
    assert [f.result() for f in created.values()] == [None, None, None]
    # creating one again changes nothing
    assert admin.create_acls([group])[group].result() is None

    assert sorted(admin.describe_acls(EVERY_ACL).result()) == sorted(
        [topic_literal, topic_prefixed, group])
    prefixed = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.PREFIXED, None,
                                None, AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(admin.describe_acls(prefixed).result()) == sorted([topic_prefixed, group])
    topics = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(admin.describe_acls(topics).result()) == sorted(
        [topic_literal, topic_prefixed])
    match = AclBindingFilter(ResourceType.TOPIC, f"t-{suffix}-x", ResourcePatternType.MATCH,
                             None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(match).result() == [topic_prefixed]

    groups = AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([groups, topics])
    assert deleted[groups].result() == [group]
    assert sorted(deleted[topics].result()) == sorted([topic_literal, topic_prefixed])
    assert admin.describe_acls(EVERY_ACL).result() == []


def test_bad_acls_get_invalid_request(admin: AdminClient) -> None:
    bad = binding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, ME,
                  AclOperation.ALTER)
    with pytest.raises(KafkaException, match="INVALID_REQUEST"):
        admin.create_acls([bad])[bad].result()


def test_authorized_operations_follow_the_acls(admin: AdminClient,
                                               broker: BrokerProcess) -> None:
    """Without ACLs (allow everyone) a topic allows every operation; one ALLOW READ makes
    the resource ACL'd, leaving READ and its implied DESCRIBE, and no DELETE."""
    topic, group = f"ops-{uuid.uuid4().hex[:6]}", f"ops-g-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()

    def topic_operations() -> set[AclOperation]:
        [future] = admin.describe_topics(TopicCollection([topic]),
                                         include_authorized_operations=True).values()
        return set(future.result().authorized_operations)

    assert topic_operations() == TOPIC_OPERATIONS
    cluster = admin.describe_cluster(include_authorized_operations=True).result()
    assert AclOperation.ALTER in set(cluster.authorized_operations)

    admin.create_acls([acl := binding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                      ME, AclOperation.READ)])[acl].result()
    assert topic_operations() == {AclOperation.READ, AclOperation.DESCRIBE}

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        [future] = admin.describe_consumer_groups(
            [group], include_authorized_operations=True).values()
        assert set(future.result().authorized_operations) == {
            AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
    finally:
        consumer.close()
