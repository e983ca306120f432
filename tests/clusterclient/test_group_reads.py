"""Batched group reads (one request per coordinator, clusterclient/group_reads.py) against
librdkafka's request per group, on the same groups of the built-in broker: the same
descriptions, the same committed offsets, the same errors; and over a secured listener."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer

from clusterclient import (
    LATEST,
    ClusterClient,
    ClusterRequestError,
    ClusterUnavailable,
    GroupState,
    GroupType,
    TopicPartition,
)
from clusterclient.wire import unsupported
from tests.securebroker import SCRAM_USERS, SecuredBroker, start_secured_broker

SUPER_USER, SUPER_PASSWORD = SCRAM_USERS["SCRAM-SHA-512"]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def clients(kafka_bootstrap: str) -> Iterator[tuple[ClusterClient, ClusterClient]]:
    batched = ClusterClient(kafka_bootstrap, {"client.id": "batched"}, timeout=10)
    per_group = ClusterClient(kafka_bootstrap, {"client.id": "per-group"}, timeout=10,
                              batched_groups=False)
    assert batched.groups_reader is not None and per_group.groups_reader is None
    yield batched, per_group
    batched.close()


def test_batched_reads_answer_as_librdkafkas_per_group_requests(
        clients: tuple[ClusterClient, ClusterClient],
        member: Callable[..., Consumer]) -> None:
    batched, per_group = clients
    topic = unique("batched")
    batched.create_topic(topic, partitions=3)
    classic, kip848, empty, nobody = (unique(p) for p in ("classic", "kip848", "empty", "no"))
    member(classic, topic)
    member(kip848, topic, "consumer")
    batched.alter_group_offsets(empty, {TopicPartition(topic, 0): 7,
                                        TopicPartition(topic, 2): 3})
    many = [unique("many") for _ in range(40)]
    for i, g in enumerate(many):
        batched.alter_group_offsets(g, {TopicPartition(topic, i % 3): i})
    groups = [classic, kip848, empty, nobody, *many]

    described = batched.describe_groups(groups)
    assert described == per_group.describe_groups(groups)
    assert (described[classic].type, described[classic].state) == (GroupType.CLASSIC,
                                                                    GroupState.STABLE)
    assert described[classic].partition_assignor and described[classic].members[0].assignment
    assert (described[kip848].type, described[kip848].state) == (GroupType.CONSUMER,
                                                                  GroupState.STABLE)
    [owner] = described[kip848].members
    assert owner.assignment == owner.target_assignment == tuple(
        TopicPartition(topic, p) for p in range(3))
    assert (described[empty].state, described[nobody].state) == (GroupState.EMPTY,
                                                                 GroupState.DEAD)

    committed = batched.committed_offsets_many(groups)
    assert committed == per_group.committed_offsets_many(groups)
    assert committed[empty].offsets == {TopicPartition(topic, 0): 7,
                                        TopicPartition(topic, 2): 3}
    assert [committed[g].offsets for g in many] == [
        {TopicPartition(topic, i % 3): i} for i in range(40)]
    assert committed[nobody].offsets == {} and committed[nobody].error is None


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    broker = start_secured_broker(tmp_path_factory.mktemp("group-reads"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{SUPER_USER}",
    })
    yield broker
    broker.process.stop()


def secured_config(broker: SecuredBroker, listener: str, **login: str) -> dict[str, Any]:
    return {"security.protocol": listener, "ssl.ca.location": broker.ca_file,
            "ssl.endpoint.identification.algorithm": "none", **login}


def both(broker: SecuredBroker, listener: str, **login: str
         ) -> tuple[ClusterClient, ClusterClient]:
    config = secured_config(broker, listener, **login)
    bootstrap = broker.bootstrap(listener)
    batched = ClusterClient(bootstrap, config, timeout=5)
    # this security is spoken, not left to librdkafka (group reads and ListOffsets alike)
    assert batched.groups_reader is not None and batched.offsets_reader is not None
    return batched, ClusterClient(bootstrap, config, timeout=5, batched_groups=False,
                                  batched_offsets=False)


def test_secured_listeners_are_read_batched_with_the_same_answers_and_errors(
        secured: SecuredBroker) -> None:
    scram = {"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": SUPER_USER,
             "sasl.password": SUPER_PASSWORD}
    admin, admin_per_group = both(secured, "SASL_SSL", **scram)
    topic, group = unique("sec"), unique("sec-group")
    admin.create_topic(topic, partitions=1)
    admin.alter_group_offsets(group, {TopicPartition(topic, 0): 5})
    assert admin.committed_offsets_many([group]) == admin_per_group.committed_offsets_many(
        [group])
    assert admin.committed_offsets(group) == {TopicPartition(topic, 0): 5}
    assert admin.describe_groups([group]) == admin_per_group.describe_groups([group])
    ends = {TopicPartition(topic, 0): LATEST}
    assert admin.list_offsets(ends).checked() == admin_per_group.list_offsets(ends).checked()

    # alice (PLAIN over SASL_SSL) and CN=alice (a client certificate over SSL) hold no
    # ACL: DESCRIBE on the group is refused, as a value for offsets, raised for describe.
    alice = both(secured, "SASL_SSL", **{"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                         "sasl.password": "alice-secret"})
    pair = secured.client
    mtls = both(secured, "SSL", **{"ssl.certificate.location": str(pair.cert),
                                   "ssl.key.location": str(pair.key)})
    for batched, per_group in (alice, mtls):
        answers = [c.committed_offsets_many([group])[group].error for c in (batched, per_group)]
        assert [(e.code, e.code_name) for e in answers if e is not None] == [
            (30, "GROUP_AUTHORIZATION_FAILED")] * 2
        for client in (batched, per_group):
            with pytest.raises(ClusterRequestError) as refused:
                client.describe_groups([group])
            assert refused.value.code_name == "GROUP_AUTHORIZATION_FAILED"
            # the topic is not theirs to DESCRIBE: no offset, an error value (which error
            # depends on what their metadata shows them of it)
            assert not client.list_offsets(ends).offsets and client.list_offsets(ends).errors


def test_a_refused_login_is_a_request_error_and_a_dead_broker_unavailable(
        secured: SecuredBroker) -> None:
    config = secured_config(secured, "SASL_SSL", **{
        "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": SCRAM_USERS["SCRAM-SHA-256"][0],
        "sasl.password": "wrong"})
    client = ClusterClient(secured.bootstrap("SASL_SSL"), config, timeout=5)
    with pytest.raises(ClusterRequestError) as refused:
        client.groups_reader.committed(["g"])  # type: ignore[union-attr]
    assert refused.value.code_name == "SASL_AUTHENTICATION_FAILED"
    nowhere = ClusterClient("127.0.0.1:1", timeout=2)
    with pytest.raises(ClusterUnavailable):
        nowhere.committed_offsets_many(["g"])


@pytest.mark.parametrize(("config", "batched"), [
    ({}, True),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}, True),
    ({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN"}, True),
    ({"security.protocol": "SSL", "ssl.ca.location": "/ca.pem",
      "enable.ssl.certificate.verification": "false"}, True),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, False),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, False),
    ({"security.protocol": "SASL_SSL"}, False),  # librdkafka's default mechanism: GSSAPI
    ({"security.protocol": "SSL", "ssl.keystore.location": "/client.p12"}, False),
    ({"security.protocol": "SSL", "ssl.ca.pem": "-----BEGIN CERTIFICATE-----"}, False),
])
def test_a_security_our_connection_does_not_speak_stays_on_librdkafka(
        config: dict[str, str], batched: bool) -> None:
    # ClusterClient reads groups batched only when this names nothing it cannot honour.
    assert (unsupported(config) is None) is batched


def test_groups_are_listed_as_librdkafka_lists_them(
        clients: tuple[ClusterClient, ClusterClient],
        member: Callable[..., Consumer]) -> None:
    batched, per_group = clients
    topic = unique("listed")
    batched.create_topic(topic, partitions=2)
    classic, kip848, committed_only = (unique(p) for p in ("classic", "kip848", "simple"))
    member(classic, topic)
    member(kip848, topic, "consumer")
    batched.alter_group_offsets(committed_only, {TopicPartition(topic, 0): 4})
    mine = {classic, kip848, committed_only}

    def listed(client: ClusterClient, *types: GroupType) -> dict[str, Any]:
        return {g.group_id: g for g in client.list_groups(types) if g.group_id in mine}

    ours = listed(batched)
    assert set(ours) == mine and ours == listed(per_group)
    assert (ours[classic].type, ours[classic].state, ours[classic].is_simple) == (
        GroupType.CLASSIC, GroupState.STABLE, False)
    assert (ours[kip848].type, ours[kip848].state) == (GroupType.CONSUMER, GroupState.STABLE)
    assert ours[committed_only].is_simple and ours[committed_only].state is GroupState.EMPTY
    assert set(listed(batched, GroupType.CONSUMER)) == {kip848}
    assert set(listed(batched, GroupType.CLASSIC)) == {classic, committed_only}


def test_a_bootstrap_server_that_refuses_is_passed_over_and_none_answering_raises(
        kafka_bootstrap: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, never listening: refused
        client = ClusterClient(f"{dead},{kafka_bootstrap}", timeout=5)
        try:
            assert isinstance(client.list_groups(), list)
        finally:
            client.close()
        nobody = ClusterClient(dead, timeout=2)
        try:
            with pytest.raises(ClusterUnavailable):
                nobody.list_groups()
        finally:
            nobody.close()
