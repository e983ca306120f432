"""Each API refuses without the ACL Kafka asks for and works with it, for real clients.

One broker with the StandardAuthorizer, `allow.everyone.if.no.acl.found=false` and no super
user. The clients under test are PLAINTEXT, so they are `User:ANONYMOUS` from 127.0.0.1.
Who grants them ACLs? The same principal from another host: the broker first runs with
`super.users=User:ANONYMOUS` just long enough to store one ACL, ALLOW User:ANONYMOUS from
127.0.0.2 ALL on the cluster, then restarts without super users (the ACL comes back from
the metadata log). The admin connection binds 127.0.0.2 (loopback, another peer IP), so it
may create and delete ACLs while the clients on 127.0.0.1 have only what a test grants.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import confluent_kafka
import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.protocol.admin import (
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess

ME = "User:ANONYMOUS"
ADMIN_HOST = "127.0.0.2"
CLUSTER, TOPIC, GROUP, TXN = 4, 2, 3, 5  # Kafka's resource type codes
LITERAL, PREFIXED = 3, 4
ALLOW, DENY = 3, 2
OPS = {"ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
       "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11,
       "IDEMPOTENT_WRITE": 12}
Acl = tuple[int, str, int, str, str, int, int]


def acl(rtype: int, name: str, op: str, *, pattern: int = LITERAL, host: str = "*",
        perm: int = ALLOW, principal: str = ME) -> Acl:
    return (rtype, name, pattern, principal, host, OPS[op], perm)


def create_acls(admin: WireClient, acls: list[Acl]) -> list[int]:
    response = admin.request(CreateAclsRequest(creations=[
        CreateAclsRequest.AclCreation(
            resource_type=a[0], resource_name=a[1], resource_pattern_type=a[2],
            principal=a[3], host=a[4], operation=a[5], permission_type=a[6])
        for a in acls]), version=3)
    return [r.error_code for r in response.results]


def delete_acls(admin: WireClient, acls: list[Acl]) -> None:
    response = admin.request(DeleteAclsRequest(filters=[
        DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=a[0], resource_name_filter=a[1], pattern_type_filter=a[2],
            principal_filter=a[3], host_filter=a[4], operation=a[5], permission_type=a[6])
        for a in acls]), version=3)
    assert all(r.error_code == 0 for r in response.filter_results), response


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("authorized"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ME,
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    }).start()
    try:
        with WireClient(process.bootstrap, source_host=ADMIN_HOST) as admin:
            assert create_acls(admin, [acl(CLUSTER, "kafka-cluster", "ALL",
                                           host=ADMIN_HOST)]) == [0]
        process.overrides["super.users"] = ""
        process.restart()
        yield process
    finally:
        process.kill()


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[WireClient]:
    with WireClient(broker.bootstrap, source_host=ADMIN_HOST) as wire:
        yield wire


@pytest.fixture
def grant(admin: WireClient) -> Iterator[Callable[..., None]]:
    """grant(*acls): create ACLs for this test; they are deleted after it."""
    granted: list[Acl] = []

    def create(*acls: Acl) -> None:
        assert create_acls(admin, list(acls)) == [0] * len(acls)
        granted.extend(acls)

    yield create
    if granted:
        delete_acls(admin, granted)


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(broker: BrokerProcess, admin: WireClient, prefix: str = "t") -> str:
    """A topic created by the admin (ALL on the cluster includes CREATE)."""
    name = new_name(prefix)
    admin.create_topic(name, 1)
    return name


def admin_client(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def produce_one(broker: BrokerProcess, topic: str, **config: Any) -> KafkaError | None:
    """Produce one record; the delivery error (None when delivered). librdkafka reports a
    refusal it already knows from the topic's metadata at once, from produce() itself (a
    loaded run's producer had its metadata before the call): that error counts the same."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000,
                         **config})
    outcome: list[KafkaError | None] = []
    try:
        producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    except KafkaException as refused:
        return cast(KafkaError, refused.args[0])
    producer.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def error_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    return int(exc.args[0].code())


def test_acl_apis_need_the_cluster_rights(broker: BrokerProcess) -> None:
    client = admin_client(broker)
    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, ME, "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        client.create_acls([binding])[binding].result()
    assert error_code(refused.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    # confluent-kafka reports DescribeAcls' top-level error as no ACLs; the wire shows it
    assert client.describe_acls(every).result() == []
    with WireClient(broker.bootstrap) as wire:
        response = wire.request(DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1), version=3)
    assert (response.error_code, response.resources) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])


def test_acl_apis_from_the_admin_host(admin: WireClient) -> None:
    """The bootstrap ACL came back from the metadata log after the restart."""
    response = admin.request(DescribeAclsRequest(
        resource_type_filter=CLUSTER, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1), version=3)
    assert response.error_code == 0
    [resource] = response.resources
    assert (resource.resource_name, [(a.host, a.operation) for a in resource.acls]) == (
        "kafka-cluster", [(ADMIN_HOST, OPS["ALL"])])
    assert create_acls(admin, [acl(CLUSTER, "other", "ALTER")]) == [ErrorCode.INVALID_REQUEST]
    assert create_acls(admin, [acl(TOPIC, "", "READ")]) == [ErrorCode.INVALID_REQUEST]
    # codes outside Kafka's enums, and a principal or host Kafka cannot parse
    assert create_acls(admin, [(99, "x", LITERAL, ME, "*", 3, ALLOW),
                               (TOPIC, "x", 99, ME, "*", 3, ALLOW),
                               (TOPIC, "x", LITERAL, ME, "*", -1, ALLOW),
                               (TOPIC, "x", LITERAL, "nobody", "*", 3, ALLOW),
                               (TOPIC, "x", LITERAL, ME, "host.example", 3, ALLOW)]) == [
        ErrorCode.INVALID_REQUEST] * 5
    unknown_filter = admin.request(DescribeAclsRequest(
        resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1), version=3)
    assert unknown_filter.error_code == ErrorCode.INVALID_REQUEST


def test_produce_needs_write(broker: BrokerProcess, admin: WireClient,
                             grant: Callable[..., None]) -> None:
    topic = make_topic(broker, admin)
    err = produce_one(broker, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(acl(TOPIC, topic, "WRITE"))
    assert produce_one(broker, topic) is None


def test_deny_beats_allow(broker: BrokerProcess, admin: WireClient,
                          grant: Callable[..., None]) -> None:
    topic = make_topic(broker, admin, "deny")
    grant(acl(TOPIC, "deny-", "ALL", pattern=PREFIXED, principal="User:*"),
          acl(TOPIC, topic, "WRITE", perm=DENY))
    err = produce_one(broker, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_one(broker, make_topic(broker, admin, "deny")) is None


def test_metadata_lists_only_describable_topics(broker: BrokerProcess, admin: WireClient,
                                                grant: Callable[..., None]) -> None:
    seen, hidden = make_topic(broker, admin), make_topic(broker, admin)
    grant(acl(TOPIC, seen, "READ"))  # READ implies DESCRIBE
    topics = admin_client(broker).list_topics(timeout=10).topics
    assert seen in topics
    assert hidden not in topics


def test_auto_creation_needs_create(broker: BrokerProcess, grant: Callable[..., None]) -> None:
    topic = new_name("auto")
    grant(acl(TOPIC, topic, "DESCRIBE"))
    metadata = admin_client(broker).list_topics(topic, timeout=10)
    assert metadata.topics[topic].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(acl(TOPIC, topic, "CREATE"))
    metadata = admin_client(broker).list_topics(topic, timeout=10)
    assert metadata.topics[topic].error is None


def test_create_and_delete_topics(broker: BrokerProcess, grant: Callable[..., None]) -> None:
    client = admin_client(broker)
    mine, other = new_name("mine"), new_name("other")
    futures = client.create_topics([NewTopic(mine, 1, 1), NewTopic(other, 1, 1)])
    for future in futures.values():
        with pytest.raises(KafkaException) as refused:
            future.result()
        assert error_code(refused.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    grant(acl(TOPIC, "mine-", "CREATE", pattern=PREFIXED))
    futures = client.create_topics([NewTopic(mine, 1, 1), NewTopic(other, 1, 1)])
    futures[mine].result()
    with pytest.raises(KafkaException):
        futures[other].result()
    # created, but its configs are not shown without DESCRIBE_CONFIGS, as in Kafka
    with WireClient(broker.bootstrap) as wire:
        created = wire.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=new_name("mine"), num_partitions=1, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=5000, validate_only=False), version=5)
    [answer] = created.topics
    assert (answer.error_code, answer.topic_config_error_code, answer.configs) == (
        0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    with pytest.raises(KafkaException) as refused:
        client.delete_topics([mine])[mine].result()
    assert error_code(refused.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    grant(acl(TOPIC, mine, "DELETE"))
    client.delete_topics([mine])[mine].result()


def test_configs_need_describe_and_alter_configs(broker: BrokerProcess, admin: WireClient,
                                                 grant: Callable[..., None]) -> None:
    topic = make_topic(broker, admin)
    client = admin_client(broker)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    with pytest.raises(KafkaException) as refused:
        client.describe_configs([resource])[resource].result()
    assert error_code(refused.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    grant(acl(TOPIC, topic, "ALTER_CONFIGS"))  # implies DESCRIBE_CONFIGS
    assert "retention.ms" in client.describe_configs([resource])[resource].result()
    change = ConfigResource(ConfigResource.Type.TOPIC, topic,
                            set_config={"retention.ms": "3600000"})
    client.alter_configs([change])[change].result()
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    with pytest.raises(KafkaException) as refused:
        client.describe_configs([broker_resource])[broker_resource].result()
    assert error_code(refused.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    group = new_name("g")  # a group's configs (KIP-848) need the rights on the group
    group_resource = ConfigResource(ConfigResource.Type.GROUP, group)
    with pytest.raises(KafkaException) as refused:
        client.describe_configs([group_resource])[group_resource].result()
    assert error_code(refused.value) == ErrorCode.GROUP_AUTHORIZATION_FAILED
    grant(acl(GROUP, group, "DESCRIBE_CONFIGS"))
    assert "consumer.session.timeout.ms" in \
        client.describe_configs([group_resource])[group_resource].result()


def test_consuming_needs_read_on_the_group_and_the_topic(
        broker: BrokerProcess, admin: WireClient, grant: Callable[..., None]) -> None:
    topic, group = make_topic(broker, admin), new_name("g")
    grant(acl(TOPIC, topic, "WRITE"))
    assert produce_one(broker, topic) is None

    def consume() -> Any:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
        try:
            consumer.subscribe([topic])
            for _ in range(30):
                msg = consumer.poll(0.5)
                if msg is not None:
                    if msg.error() is None:
                        consumer.commit(msg, asynchronous=False)
                    return msg
            return None
        finally:
            consumer.close()

    refused = consume()
    assert refused is not None and refused.error().code() in (
        KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    grant(acl(GROUP, group, "READ"))
    refused = consume()
    assert refused is not None and refused.error() is not None
    assert refused.error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(acl(TOPIC, topic, "READ"))
    consumed = consume()
    assert consumed is not None and consumed.error() is None and consumed.value() == b"v"
    client = admin_client(broker)
    [described] = client.describe_consumer_groups(
        [group], include_authorized_operations=True).values()
    assert set(described.result().authorized_operations) == {
        AclOperation.READ, AclOperation.DESCRIBE}
    listed = client.list_consumer_groups().result()
    assert group in {g.group_id for g in listed.valid}


def test_offsets_need_describe_on_the_group(broker: BrokerProcess, admin: WireClient,
                                            grant: Callable[..., None]) -> None:
    topic, group = make_topic(broker, admin), new_name("g")
    client = admin_client(broker)
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    with pytest.raises(KafkaException) as refused:
        client.list_consumer_group_offsets(request)[group].result()
    assert error_code(refused.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(acl(GROUP, group, "DESCRIBE"), acl(TOPIC, topic, "DESCRIBE"))
    listed_offsets = client.list_consumer_group_offsets(request)[group].result()
    [committed] = listed_offsets.topic_partitions
    assert committed.offset < 0 and committed.error is None  # nothing committed yet
    listed = admin_client(broker).list_consumer_groups().result()
    assert group not in {g.group_id for g in listed.valid}  # an empty group is not listed


def test_idempotent_producer_needs_write_somewhere(broker: BrokerProcess, admin: WireClient,
                                                   grant: Callable[..., None]) -> None:
    topic = make_topic(broker, admin)
    err = produce_one(broker, topic, **{"enable.idempotence": True})
    assert err is not None
    assert err.code() in (KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                          KafkaError.TOPIC_AUTHORIZATION_FAILED)
    grant(acl(TOPIC, topic, "WRITE"))  # KIP-679: WRITE on a topic is enough
    assert produce_one(broker, topic, **{"enable.idempotence": True}) is None


def test_transactions_need_write_on_the_transactional_id(
        broker: BrokerProcess, admin: WireClient, grant: Callable[..., None]) -> None:
    topic, txn_id = make_topic(broker, admin), new_name("txn")
    # The broker's own requests (transaction markers) come from 127.0.0.1 as ANONYMOUS too,
    # over PLAINTEXT: they need CLUSTER_ACTION, as in Kafka (brokercore/security/README).
    grant(acl(TOPIC, topic, "WRITE"), acl(CLUSTER, "kafka-cluster", "CLUSTER_ACTION"))

    def run() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap,
                             "transactional.id": txn_id, "transaction.timeout.ms": 10000})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce(topic, b"in a transaction")
        producer.commit_transaction(10)

    with pytest.raises(KafkaException) as refused:
        run()
    assert error_code(refused.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(acl(TXN, txn_id, "WRITE"))
    run()


def test_authorized_operations(broker: BrokerProcess, admin: WireClient,
                               grant: Callable[..., None]) -> None:
    """KIP-430 through confluent-kafka: what describe_* report follows the ACLs."""
    topic = make_topic(broker, admin)
    client = admin_client(broker)
    grant(acl(TOPIC, topic, "READ"), acl(TOPIC, topic, "ALTER_CONFIGS"),
          acl(CLUSTER, "kafka-cluster", "DESCRIBE"))
    [described] = client.describe_topics(TopicCollection([topic]),
                                         include_authorized_operations=True).values()
    assert set(described.result().authorized_operations) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS}
    cluster = client.describe_cluster(include_authorized_operations=True).result()
    assert set(cluster.authorized_operations) == {AclOperation.DESCRIBE}


def test_describe_topics_without_describe(broker: BrokerProcess, admin: WireClient) -> None:
    topic = make_topic(broker, admin)
    client = admin_client(broker)  # kept: a collected client fails its futures
    [described] = client.describe_topics(TopicCollection([topic])).values()
    with pytest.raises(KafkaException) as refused:
        described.result()
    assert error_code(refused.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_acls_need_no_restart(broker: BrokerProcess, admin: WireClient,
                              grant: Callable[..., None]) -> None:
    """An ACL deleted takes effect on the next request."""
    topic = make_topic(broker, admin)
    write = acl(TOPIC, topic, "WRITE")
    assert create_acls(admin, [write]) == [0]
    assert produce_one(broker, topic) is None
    delete_acls(admin, [write])
    err = produce_one(broker, topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_without_authorizer_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    plain = BrokerProcess(tmp_path / "plain").start()
    try:
        with WireClient(plain.bootstrap) as wire:
            assert create_acls(wire, [acl(TOPIC, "x", "READ")]) == [
                ErrorCode.SECURITY_DISABLED]
        assert confluent_kafka is not None
    finally:
        plain.kill()


def test_broker_requests_need_cluster_action(broker: BrokerProcess, admin: WireClient,
                                             grant: Callable[..., None]) -> None:
    """What a follower sends (OffsetForLeaderEpoch with its replica id) is a cluster action:
    over PLAINTEXT the broker is User:ANONYMOUS too, so it needs CLUSTER_ACTION (or a place
    in super.users), whatever its ACLs on the topic."""
    topic = make_topic(broker, admin)
    grant(acl(TOPIC, topic, "ALL"))

    def follower_epoch_end() -> int:
        request = OffsetForLeaderEpochRequest(replica_id=2, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=-1, leader_epoch=0)])])
        with WireClient(broker.bootstrap) as wire:
            response = wire.request(request, version=4)
        return int(response.topics[0].partitions[0].error_code)

    assert follower_epoch_end() == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    grant(acl(CLUSTER, "kafka-cluster", "CLUSTER_ACTION", host="127.0.0.1"))
    assert follower_epoch_end() == ErrorCode.NONE


def test_scram_credentials_need_describe_and_alter_on_the_cluster(
        broker: BrokerProcess, grant: Callable[..., None]) -> None:
    client = admin_client(broker)
    user = new_name("u")
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret-pw")
    with pytest.raises(KafkaException) as refused:
        client.alter_user_scram_credentials([upsert])[user].result()
    assert error_code(refused.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as refused:
        client.describe_user_scram_credentials([user])[user].result()
    assert error_code(refused.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(acl(CLUSTER, "kafka-cluster", "ALTER"))  # implies DESCRIBE
    client.alter_user_scram_credentials([upsert])[user].result()
    described = client.describe_user_scram_credentials([user])[user].result()
    assert [i.mechanism for i in described.scram_credential_infos] == [
        ScramMechanism.SCRAM_SHA_256]
