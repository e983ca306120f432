"""ACLs on a 3-broker cluster: every broker enforces them, and they survive kill -9 of the
active controller and the restart of the killed node.

The brokers replicate over PLAINTEXT, so their own requests (follower fetches) come as
User:ANONYMOUS, like the test's clients; they need CLUSTER_ACTION. As in Kafka's test
clusters, `allow.everyone.if.no.acl.found=true` gives it while the cluster resource has no
ACL; the ACLs here are on topics, where they are enforced for everyone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from kafka.protocol.admin import DescribeAclsRequest

from tests.brokercore.security.test_api_authorization import (
    DENY,
    PREFIXED,
    TOPIC,
    acl,
    create_acls,
    new_name,
)
from tests.brokercore.wire import WireClient
from tests.brokerproc import ClusterProcess
from tests.cluster.faults import FAST_FAILOVER, wait_until


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides={
        **FAST_FAILOVER,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }) as c:
        yield c


def acls_on(bootstrap: str) -> set[tuple[object, ...]]:
    """Every ACL one broker describes, as (type, name, pattern, principal, host, op, perm)."""
    with WireClient(bootstrap) as wire:
        response = wire.request(DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1), version=3)
    assert response.error_code == 0, response
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
             a.permission_type) for r in response.resources for a in r.acls}


def has_acls(cluster: ClusterProcess, node: int,
             expected: set[tuple[object, ...]]) -> Callable[[], bool]:
    return lambda: acls_on(cluster.bootstrap_of(node)) == expected


def produce_error(bootstrap: str, topic: str) -> int | None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "message.timeout.ms": 10000, "acks": "all"})
    outcome: list[confluent_kafka.KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else int(outcome[0].code())


def test_acls_survive_kill_of_the_controller(cluster: ClusterProcess) -> None:
    locked = new_name("locked")
    granted = [acl(TOPIC, "locked-", "WRITE", pattern=PREFIXED, perm=DENY),
               acl(TOPIC, "shared-", "READ", pattern=PREFIXED, principal="User:alice")]
    with WireClient(cluster.bootstrap_of(1)) as wire:
        assert create_acls(wire, granted) == [0, 0]
    expected: set[tuple[object, ...]] = set(granted)
    for node in (1, 2, 3):  # replicated to every broker's image
        wait_until(f"broker {node} has the ACLs", has_acls(cluster, node, expected))
    assert produce_error(cluster.bootstrap, locked) == \
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED

    controller = wait_until("an active controller", lambda: cluster.status()["active_controller"])
    cluster.kill(controller)
    survivors = [node for node in (1, 2, 3) if node != controller]
    wait_until("a new active controller",
               lambda: cluster.status()["active_controller"] in survivors)
    for node in survivors:
        assert acls_on(cluster.bootstrap_of(node)) == expected
        assert produce_error(cluster.bootstrap_of(node), new_name("locked")) == \
            confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED

    # the new controller writes ACLs too, and the killed node catches up on restart
    later = acl(TOPIC, "after-", "READ", pattern=PREFIXED, principal="User:bob")
    with WireClient(cluster.bootstrap_of(survivors[0])) as wire:
        assert create_acls(wire, [later]) == [0]
    cluster.start(controller)
    expected.add(later)
    for node in (1, 2, 3):
        wait_until(f"broker {node} has every ACL", has_acls(cluster, node, expected))
    assert produce_error(cluster.bootstrap_of(controller), new_name("locked")) == \
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(cluster.bootstrap, new_name("open")) is None
