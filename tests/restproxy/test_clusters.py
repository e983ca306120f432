"""v3 over two clusters: the session broker (the default) and a second built-in cluster, a
one-broker `python -m brokercluster` of this module, configured as MILLRACE_CLUSTERS does."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from django.conf import settings

from clusterclient.clusters import KafkaCluster, parse_pairs
from restproxy.api import selected
from restproxy.client import reset_gateway
from tests.brokerproc import ClusterProcess
from tests.restproxy.conftest import Proxy

APP = "application/json"


@pytest.fixture(scope="module")
def second(proxy_cluster: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ClusterProcess]:
    with ClusterProcess(Path(tmp_path_factory.mktemp("second-cluster")), brokers=1) as cluster:
        previous = settings.KAFKA_EXTRA_CLUSTERS
        settings.KAFKA_EXTRA_CLUSTERS = tuple(parse_pairs(f"backup={cluster.bootstrap}"))
        reset_gateway()
        yield cluster
        settings.KAFKA_EXTRA_CLUSTERS = previous
        reset_gateway()


def cluster_id(bootstrap: str) -> str:
    found = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).cluster_id
    assert found
    return str(found)


def read_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(60):
            values += [m.value() for m in consumer.consume(count, 0.5) if not m.error()]
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


def test_clusters_lists_every_configured_cluster(proxy: Proxy, second: ClusterProcess,
                                                 kafka_bootstrap: str) -> None:
    body = proxy.get("v3/clusters", content_type=APP).json()
    ids = [c["cluster_id"] for c in body["data"]]
    assert ids == [cluster_id(kafka_bootstrap), cluster_id(second.bootstrap)]
    other = body["data"][1]
    assert other["kind"] == "KafkaCluster"
    assert other["metadata"]["self"].endswith(f"/v3/clusters/{ids[1]}")
    assert other["topics"]["related"].endswith(f"/v3/clusters/{ids[1]}/topics")
    detail = proxy.get(f"v3/clusters/{ids[1]}").json()
    assert detail["cluster_id"] == ids[1]
    brokers = proxy.get(f"v3/clusters/{ids[1]}/brokers").json()["data"]
    assert [(b["broker_id"], b["port"]) for b in brokers] == [
        (1, int(second.bootstrap.rsplit(":", 1)[1]))]


def test_topics_and_produce_act_on_the_named_cluster(proxy: Proxy, second: ClusterProcess,
                                                     kafka_bootstrap: str) -> None:
    topic = f"two-{uuid.uuid4().hex[:8]}"
    ids = {name: cluster_id(bootstrap) for name, bootstrap
           in (("default", kafka_bootstrap), ("backup", second.bootstrap))}
    for name, cid in ids.items():
        created = proxy.post(f"v3/clusters/{cid}/topics", {"topic_name": topic,
                                                          "partitions_count": 1},
                             content_type=APP)
        assert created.status_code == 201, created.content
        value = base64.b64encode(f"to {name}".encode()).decode()
        produced = proxy.post(f"v3/clusters/{cid}/topics/{topic}/records",
                              {"value": {"type": "BINARY", "data": value}}, content_type=APP)
        assert produced.status_code == 200, produced.content
        assert produced.json()["cluster_id"] == cid
        # the selection was the request's: the caller (the test client's thread) still acts
        # on the default cluster (it once kept "backup" and later tests' producers with it)
        assert selected.get() is None
    assert read_values(kafka_bootstrap, topic, 1) == [b"to default"]
    assert read_values(second.bootstrap, topic, 1) == [b"to backup"]
    # a topic on the second cluster only: listed there, not on the default; v2 stays there
    only = f"only-{uuid.uuid4().hex[:8]}"
    assert proxy.post(f"v3/clusters/{ids['backup']}/topics", {"topic_name": only},
                      content_type=APP).status_code == 201
    listed = {t["topic_name"] for t in
              proxy.get(f"v3/clusters/{ids['backup']}/topics").json()["data"]}
    assert {topic, only} <= listed
    on_default = {t["topic_name"] for t in
                  proxy.get(f"v3/clusters/{ids['default']}/topics").json()["data"]}
    assert topic in on_default and only not in on_default
    assert only not in proxy.get("topics").json()
    assert proxy.get(f"topics/{only}").status_code == 404


def test_consumer_groups_are_the_named_clusters(proxy: Proxy, second: ClusterProcess) -> None:
    cid = cluster_id(second.bootstrap)
    topic, group = f"grp-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    assert proxy.post(f"v3/clusters/{cid}/topics", {"topic_name": topic},
                      content_type=APP).status_code == 201
    consumer = Consumer({"bootstrap.servers": second.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()
    groups = proxy.get(f"v3/clusters/{cid}/consumer-groups").json()["data"]
    assert group in {g["consumer_group_id"] for g in groups}
    lags = proxy.get(f"v3/clusters/{cid}/consumer-groups/{group}/lags").json()["data"]
    assert [(lag["topic_name"], lag["current_offset"]) for lag in lags] == [(topic, 0)]


def test_an_unknown_cluster_id_is_confluents_404(proxy: Proxy, second: ClusterProcess) -> None:
    for path in ("v3/clusters/nope", "v3/clusters/nope/topics",
                 "v3/clusters/nope/consumer-groups"):
        answer = proxy.get(path)
        assert answer.status_code == 404
        assert answer.json() == {"error_code": 404, "message": "Cluster nope cannot be found."}
    answer = proxy.post("v3/clusters/nope/topics/t/records",
                        {"value": {"type": "JSON", "data": 1}}, content_type=APP)
    assert answer.status_code == 404
    assert answer.json()["error_code"] == 404


def test_a_cluster_that_does_not_answer_is_left_out_of_the_list(
        proxy: Proxy, second: ClusterProcess, kafka_bootstrap: str) -> None:
    previous = settings.KAFKA_EXTRA_CLUSTERS
    settings.KAFKA_EXTRA_CLUSTERS = (KafkaCluster("down", "127.0.0.1:1"), *previous)
    try:
        answer = proxy.get("v3/clusters", content_type=APP)
        assert answer.status_code == 200
        assert [c["cluster_id"] for c in answer.json()["data"]] == [
            cluster_id(kafka_bootstrap), cluster_id(second.bootstrap)]
        assert proxy.get(f"v3/clusters/{cluster_id(second.bootstrap)}/topics").status_code == 200
    finally:
        settings.KAFKA_EXTRA_CLUSTERS = previous


def test_settings_read_name_bootstrap_pairs_and_control_center_properties(
        tmp_path: Path) -> None:
    from clusterclient.clusters import extra_clusters

    (tmp_path / "cluster-dr").mkdir()
    c3 = tmp_path / "c3.properties"
    c3.write_text("confluent.controlcenter.kafka.secured.bootstrap.servers=k1:9093,k2:9093\n"
                  "confluent.controlcenter.kafka.secured.security.protocol=SASL_SSL\n"
                  "confluent.controlcenter.id=1\n")
    found = extra_clusters("dr=127.0.0.1:10092,127.0.0.1:10093; backup=b:9092", str(c3),
                           tmp_path)
    assert found == (
        KafkaCluster("dr", "127.0.0.1:10092,127.0.0.1:10093", {}, str(tmp_path / "cluster-dr")),
        KafkaCluster("backup", "b:9092"),
        KafkaCluster("secured", "k1:9093,k2:9093", {"security.protocol": "SASL_SSL"}))
    with pytest.raises(ValueError, match="name=bootstrap"):
        extra_clusters("dr", "", tmp_path)


def test_a_cluster_s_client_config_file_gives_its_clients_their_login(tmp_path: Path) -> None:
    """MILLRACE_CLUSTER_CLIENT_CONFIGS, as `platform --secure --clusters N` sets it: the
    file's keys but bootstrap.servers, under the clusters file's own keys for the cluster."""
    from clusterclient.clusters import extra_clusters

    login = tmp_path / "service-dr.properties"
    login.write_text("# made by the platform\nbootstrap.servers=elsewhere:1\n"
                     "security.protocol=SASL_SSL\nsasl.mechanisms=PLAIN\n"
                     "sasl.username=millrace\nsasl.password=pw\nssl.ca.location=/ca.crt\n")
    c3 = tmp_path / "c3.properties"
    c3.write_text("confluent.controlcenter.kafka.secured.bootstrap.servers=k1:9093\n"
                  "confluent.controlcenter.kafka.secured.sasl.mechanisms=SCRAM-SHA-512\n")
    found = extra_clusters("dr=127.0.0.1:10092", str(c3), tmp_path,
                           f"dr={login} secured={login}")
    assert found[0].client_config() == {
        "bootstrap.servers": "127.0.0.1:10092", "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "PLAIN", "sasl.username": "millrace", "sasl.password": "pw",
        "ssl.ca.location": "/ca.crt"}
    assert found[1].config["sasl.mechanisms"] == "SCRAM-SHA-512"  # the clusters file's
    with pytest.raises(ValueError, match="names backup: no such cluster"):
        extra_clusters("dr=127.0.0.1:10092", "", tmp_path, f"backup={login}")
    with pytest.raises(ValueError, match="is not name=path"):
        extra_clusters("dr=127.0.0.1:10092", "", tmp_path, "dr")
