"""The collector against the built-in broker: the read model, lag, history topics, metrics,
live pushes, and a cluster that stops answering and comes back."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.test import override_settings

from brokercluster.ports import free_port
from controlcenter import events
from controlcenter.collector.loop import Collector, CollectorConfig
from controlcenter.collector.metrics import serve
from controlcenter.models import (
    BrokerState,
    ClusterEvent,
    ClusterState,
    GroupLagHistory,
    GroupPartitionLag,
    GroupState,
    PartitionLagHistory,
    PartitionState,
    TopicState,
)
from laganalysis import records
from tests.brokerproc import BrokerProcess, ClusterProcess
from tests.compat.clients import new_topic

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def own_hub() -> Iterator[None]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    layers = {"default": {"BACKEND": "millrace.channelhub.HubChannelLayer",
                          "CONFIG": {"data_dir": str(settings.DATA_DIR), "name": name}}}
    with override_settings(CHANNEL_LAYERS=layers):
        yield


def collector_for(bootstrap: str, interval: float = 2.0) -> Collector:
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        return Collector(CollectorConfig(bootstrap_servers=bootstrap, interval=interval))


def produce(bootstrap: str, topic: str, count: int, partitions: int = 3) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(20) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == count


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic(topic, partitions, 1)])[topic].result(20)


def test_a_cycle_fills_the_read_model_with_lag_and_history(kafka_bootstrap: str) -> None:
    topic, group = new_topic("collect"), f"g-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic)
    produce(kafka_bootstrap, topic, 30)
    consume_and_commit(kafka_bootstrap, topic, group, 30)
    produce(kafka_bootstrap, topic, 12)  # 4 behind on each partition
    collector = collector_for(kafka_bootstrap)
    try:
        collector.cycle()
        produce(kafka_bootstrap, topic, 3)
        collector.cycle()
        collector.history.producer.flush(10)  # type: ignore[union-attr]
    finally:
        collector.close()

    cluster = ClusterState.objects.get(bootstrap_servers=kafka_bootstrap)
    assert cluster.reachable and cluster.brokers == 1 and cluster.cycle_seconds is not None
    assert BrokerState.objects.get().status == "up"
    state = TopicState.objects.get(name=topic)
    assert (state.partitions, state.total_messages) == (3, 45)
    assert state.messages_in_per_sec is not None and state.messages_in_per_sec > 0
    rows_of_topic = PartitionState.objects.filter(topic=topic)
    ends = sorted(o or 0 for o in rows_of_topic.values_list("log_end_offset", flat=True))
    assert ends == [15, 15, 15]
    lag = GroupState.objects.get(group_id=group)
    assert (lag.total_lag, lag.max_lag, lag.partitions) == (15, 5, 3)
    # Nobody consumes and the lag stays: Burrow's STOP rule, reported for the group as ERR.
    assert lag.status == "ERR" and lag.members == 0
    rows = GroupPartitionLag.objects.filter(group_id=group)
    assert {r.status for r in rows} == {"STOP"}
    assert sorted(r.committed_offset or 0 for r in rows) == [10, 10, 10]
    assert all(r.lag_seconds is not None and r.lag_seconds >= 0 for r in rows)
    assert GroupLagHistory.objects.filter(group_id=group).count() == 2
    assert PartitionLagHistory.objects.filter(group_id=group).count() == 6
    samples = read_topic(kafka_bootstrap, records.LAG_SAMPLES_TOPIC)
    mine = [s for s in map(records.decode_lag_sample, samples) if s.group == group]
    assert len(mine) == 6 and {s.lag for s in mine} == {4, 5}


def read_topic(bootstrap: str, topic: str) -> list[bytes]:
    """Every value in the topic up to each partition's end (the collector's producer was
    flushed), not until 2 s pass without a record."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "enable.partition.eof": True})
    partitions = len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer.subscribe([topic])
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + 30
    while len(ended) < partitions:
        assert time.monotonic() < deadline, f"{topic}: partitions {ended} ended, not all"
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is None:
            values.append(message.value())
        elif message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
            ended.add(message.partition())
    consumer.close()
    return values


def test_the_lag_metrics_use_kafka_lag_exporter_names_and_labels(kafka_bootstrap: str) -> None:
    topic, group = new_topic("metrics"), f"g-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, 5, partitions=1)
    consume_and_commit(kafka_bootstrap, topic, group, 5)
    produce(kafka_bootstrap, topic, 2, partitions=1)
    collector = collector_for(kafka_bootstrap)
    try:
        collector.cycle()
        produce(kafka_bootstrap, topic, 1, partitions=1)  # a second end-offset point: seconds
        collector.cycle()
        port = free_port()
        serve(collector.metrics, "127.0.0.1", port)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        collector.close()
    where = f'cluster_name="millrace",group="{group}"'
    assert f"kafka_consumergroup_group_max_lag{{{where}}} 3.0" in text
    assert f"kafka_consumergroup_group_sum_lag{{{where}}} 3.0" in text
    assert f'kafka_consumergroup_group_topic_sum_lag{{{where},topic="{topic}"}} 3.0' in text
    lag_line = next(line for line in text.splitlines()
                    if line.startswith("kafka_consumergroup_group_lag{") and group in line)
    for label in ("cluster_name", "group", "topic", "partition", "member_host", "consumer_id",
                  "client_id"):
        assert f'{label}="' in lag_line
    assert lag_line.endswith(" 3.0")
    assert any(line.startswith("kafka_consumergroup_group_lag_seconds{") and group in line
               for line in text.splitlines())
    labels = f'cluster_name="millrace",partition="0",topic="{topic}"'
    assert f"kafka_partition_latest_offset{{{labels}}} 8.0" in text
    assert f"kafka_partition_earliest_offset{{{labels}}} 0.0" in text


def test_a_stopped_cluster_shows_within_one_interval_and_the_collector_recovers(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory()
    collector = collector_for(broker.bootstrap, interval=2.0)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("cluster", channel)
    try:
        collector.cycle()
        assert json.loads(async_to_sync(layer.receive)(channel)["text"])["active"] is False
        broker.kill()
        took = collector.cycle()
        assert took <= collector.config.interval + 0.5  # one bounded attempt, no hang
        state = ClusterState.objects.get(bootstrap_servers=broker.bootstrap)
        assert not state.reachable and state.unreachable_since is not None
        assert state.last_error
        banner = json.loads(async_to_sync(layer.receive)(channel)["text"])
        assert banner["type"] == "banner" and banner["level"] == "error"
        assert ClusterEvent.objects.filter(kind="unreachable").exists()

        broker.start()
        deadline = time.monotonic() + 30
        while not ClusterState.objects.get(bootstrap_servers=broker.bootstrap).reachable:
            assert time.monotonic() < deadline, "the collector did not recover"
            collector.cycle()
        banner = json.loads(async_to_sync(layer.receive)(channel)["text"])
        assert banner["type"] == "banner" and banner["key"] == "cluster"
        assert banner["active"] is False and banner["text"] == "cluster reachable"
    finally:
        collector.close()


def test_changed_objects_are_pushed_as_fragments_rendered_once(kafka_bootstrap: str) -> None:
    collector = collector_for(kafka_bootstrap)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("overview", channel)
    try:
        with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):  # ClusterState.current()
            collector.cycle()
            assert collector.pusher.wait()  # rendered off the cycle, on the pusher's thread
        message = json.loads(async_to_sync(layer.receive)(channel)["text"])
        assert message["type"] == "fragment" and message["id"] == "cluster-health"
        assert "Brokers" in message["html"]
    finally:
        collector.close()
    assert events.group_name("topic", "orders") == "topic.orders"


def test_partition_and_topic_sizes_come_from_the_leaders_metrics(tmp_path: Path) -> None:
    topic = new_topic("sized")
    with ClusterProcess(tmp_path / "cluster", brokers=1) as cluster:
        create_topic(cluster.bootstrap, topic, 2)
        produce(cluster.bootstrap, topic, 20, partitions=2)
        collector = Collector(CollectorConfig(bootstrap_servers=cluster.bootstrap, interval=2.0,
                                              supervisor_dir=cluster.data_dir,
                                              history_topics=False))
        try:
            collector.cycle()
        finally:
            collector.close()
        on_disk = {p: sum(f.stat().st_size for f in
                          (cluster.data_dir / "broker-1").rglob(f"{topic}-{p}/*.log"))
                   for p in (0, 1)}
    sizes = dict(PartitionState.objects.filter(topic=topic)
                 .values_list("partition", "size_bytes"))
    assert sizes == on_disk and all(on_disk.values())
    assert TopicState.objects.get(name=topic).size_bytes == sum(on_disk.values())


def test_fragments_that_share_a_context_read_it_once_per_push(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str | None] = []

    def context(key: str | None) -> dict[str, object]:
        calls.append(key)
        return {"cluster": None}

    monkeypatch.setitem(events._FRAGMENTS, "subject", [])
    for element_id in ("first", "second"):
        events.register_fragment("subject", element_id,
                                 "controlcenter/fragments/cluster_health.html", context)
    messages = [json.loads(m) for m in events.render("subject", "orders-value")]
    assert [m["id"] for m in messages] == ["first", "second"]
    assert calls == ["orders-value"]


def test_the_platforms_history_topics_are_internal_last_and_hidden(
        kafka_bootstrap: str) -> None:
    from controlcenter.pages.overview import busiest_topics_context
    from controlcenter.pages.topics import search_topics

    topic = new_topic("user")
    create_topic(kafka_bootstrap, topic)
    produce(kafka_bootstrap, topic, 3)
    collector = collector_for(kafka_bootstrap)
    try:
        collector.cycle()  # creates the history topics
        collector.cycle()
    finally:
        collector.close()
    platform = set(records.TOPIC_SETTINGS)
    flags = dict(TopicState.objects.values_list("name", "internal"))
    assert {flags[name] for name in platform} == {True} and flags[topic] is False
    shown = {t.name for t in search_topics("", show_internal=False)}
    assert topic in shown and not platform & shown
    assert platform <= {t.name for t in search_topics("", show_internal=True)}
    overview = [t.internal for t in busiest_topics_context(None)["topics"]]
    assert overview == sorted(overview)  # user topics first, however busy the history is


def test_pushes_that_pile_up_during_a_render_go_out_once_in_the_next_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from controlcenter.collector.pushes import Pusher

    batches: list[list[tuple[str, str | None]]] = []
    rendering, release = threading.Event(), threading.Event()

    def publish_changes(changed: list[tuple[str, str | None]]) -> int:
        batches.append(list(changed))
        rendering.set()
        release.wait(10)
        if len(batches) == 1:
            raise RuntimeError("a template failed")  # logged; the pushes go on
        return len(changed)

    monkeypatch.setattr(events, "publish_changes", publish_changes)
    pusher = Pusher()
    try:
        pusher.submit([("group", "a")])
        assert rendering.wait(10)
        for key in ("b", "c", "b"):  # arrive while "a" renders
            pusher.submit([("group", key), ("groups", None)])
        release.set()
        assert pusher.wait(10)
    finally:
        pusher.close()
    assert batches == [[("group", "a")], [("group", "b"), ("groups", None), ("group", "c")]]
