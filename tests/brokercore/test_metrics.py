"""Prometheus metrics scraped over HTTP from a live broker process."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

import confluent_kafka.admin
import pytest
from kafka.protocol.consumer import FetchRequest
from prometheus_client.parser import text_string_to_metric_families

from brokercluster.ports import free_port
from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess
from tests.compat.clients import confluent_produce, new_topic, sample_messages

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Broker:
    process: BrokerProcess
    metrics_port: int

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> Broker:
    port = free_port()
    return Broker(broker_factory({"metrics.http.listener": f"127.0.0.1:{port}"}), port)


def scrape(broker: Broker, path: str = "/metrics") -> Samples:
    url = f"http://127.0.0.1:{broker.metrics_port}{path}"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def create_topic(bootstrap: str, partitions: int, **configs: str) -> str:
    name = new_topic("metrics")
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    new = confluent_kafka.admin.NewTopic(name, partitions, 1, config=configs)
    admin.create_topics([new])[name].result(timeout=15)
    return name


def gauge(samples: Samples, name: str) -> float:
    return samples[(name, ())]


def test_a_scrape_counts_partitions_leaders_and_unhealthy_isrs(broker: Broker) -> None:
    before = scrape(broker)
    create_topic(broker.bootstrap, 3)
    create_topic(broker.bootstrap, 2, **{"min.insync.replicas": "2"})
    after = scrape(broker)
    for name in ("kafka_server_replicamanager_partitioncount",
                 "kafka_server_replicamanager_leadercount",
                 "kafka_controller_kafkacontroller_globalpartitioncount"):
        assert gauge(after, name) - gauge(before, name) == 5, name
    assert gauge(after, "kafka_controller_kafkacontroller_globaltopiccount") - gauge(
        before, "kafka_controller_kafkacontroller_globaltopiccount") == 2
    # One replica and min.insync.replicas=2: under min ISR, but not under-replicated.
    assert gauge(after, "kafka_server_replicamanager_underminisrpartitioncount") == 2
    assert gauge(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert gauge(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert gauge(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert gauge(after, "kafka_controller_kafkacontroller_activebrokercount") == 1
    assert gauge(after, "kafka_controller_kafkacontroller_fencedbrokercount") == 0


def test_every_topic_has_its_byte_and_message_counters(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap, 1)
    confluent_produce(broker.bootstrap, topic, sample_messages(10))
    samples = scrape(broker)
    for name in ("bytesin", "bytesout", "messagesin"):
        assert (f"kafka_server_brokertopicmetrics_{name}_total", (("topic", topic),)) in samples
        assert (f"kafka_server_brokertopicmetrics_{name}_total", ()) in samples


def test_produced_records_show_in_the_topic_counters(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap, 1)
    confluent_produce(broker.bootstrap, topic, sample_messages(10))
    samples = scrape(broker)
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", topic),))] == 10
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", topic),))] > 0
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", ())] > 0


def test_other_paths_and_methods_and_garbage_get_http_errors(broker: Broker) -> None:
    with pytest.raises(urllib.error.HTTPError) as exc:
        scrape(broker, "/nope")
    assert exc.value.code == 404
    port = broker.metrics_port
    for request in (b"POST /metrics HTTP/1.1\r\n\r\n", b"\x00\xff garbage\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request)
            assert sock.recv(100).split(b" ")[1] in (b"405", b"400")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")  # and then hangs up mid-request
    assert gauge(scrape(broker), "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert broker.process.proc is not None and broker.process.proc.poll() is None


def test_each_partition_reports_its_log_size_in_bytes(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap, 2)
    confluent_produce(broker.bootstrap, topic, sample_messages(10))  # every one to partition 0
    samples = scrape(broker)
    sizes = {p: samples[("kafka_log_log_size", (("partition", str(p)), ("topic", topic)))]
             for p in (0, 1)}
    on_disk = sum(f.stat().st_size
                  for f in (broker.process.data_dir / "logs" / f"{topic}-0").glob("*.log"))
    assert sizes == {0: on_disk, 1: 0} and on_disk > 0


def test_fetch_sessions_show_in_the_session_cache_gauges(broker: Broker) -> None:
    topic = create_topic(broker.bootstrap, 3)
    part = FetchRequest.FetchTopic.FetchPartition
    with WireClient(broker.bootstrap) as client:
        opened = client.request(FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=2**20, isolation_level=0,
            session_id=0, session_epoch=0, forgotten_topics_data=[], rack_id="",
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                part(partition=i, current_leader_epoch=-1, fetch_offset=0,
                     last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1024)
                for i in range(3)])]), version=12)
    assert opened.session_id > 0
    samples = scrape(broker)
    assert gauge(samples, "kafka_server_fetchsessioncache_numincrementalfetchsessions") == 1
    assert gauge(samples,
                 "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 3
