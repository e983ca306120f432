"""The Replication page in real Chromium against the real app (Daphne in its own process),
two clusters (A: the session broker; B: a broker process of this module) and a Connect
worker on B running a MirrorSourceConnector and a MirrorCheckpointConnector from A. The
page shows each partition's source end, how far the flow has copied it and the target's
end, and the group's checkpoint; records produced and consumed on A afterwards show up on
the open page without a reload. Screenshots: var/screenshots/<test name>/."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.test import override_settings
from playwright.sync_api import expect

from tests.brokerproc import BrokerProcess
from tests.connect.workers import WorkerProcess, wait_for
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.conftest import PASSWORD, make_user

ONE = {"replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
       "checkpoints.topic.replication.factor": "1"}


@pytest.fixture(scope="module")
def cluster_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("replication-b")).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def worker(cluster_b: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    proc = WorkerProcess(tmp_path_factory.mktemp("replication-worker"), cluster_b.bootstrap,
                         f"replication-{uuid.uuid4().hex[:6]}").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def app_server(django_db_setup: None, django_db_blocker: Any, kafka_bootstrap: str,
               worker: WorkerProcess) -> Iterator[LiveServer]:
    with django_db_blocker.unblock(), override_settings(
            KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, MILLRACE_CONNECT_URL=worker.url), \
            serve("millrace.asgi:application") as server:
        yield server


@pytest.fixture
def tab(chromium: Any, app_server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:
    browser = Browser(chromium, app_server, request.node.name)
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + count):
        producer.produce(topic, f"value-{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, topic: str, group: str, upto: int) -> None:
    """The group reads partition 0 up to offset `upto` and commits there."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    last = -1
    while last + 1 < upto:
        for msg in consumer.consume(100, 1.0):
            if msg.error() is None:
                last = msg.offset()
    consumer.commit(offsets=[TopicPartition(topic, 0, upto)], asynchronous=False)
    consumer.close()


def test_the_replication_page_shows_both_clusters_offsets_and_the_checkpoints_live(
        tab: Browser, kafka_bootstrap: str, cluster_b: BrokerProcess,
        worker: WorkerProcess) -> None:
    run = uuid.uuid4().hex[:6]
    topic, group = f"shop-{run}", f"shop-app-{run}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    _produce(kafka_bootstrap, topic, 0, 20)
    _consume(kafka_bootstrap, topic, group, 20)
    flow = {"source.cluster.alias": "A", "target.cluster.alias": "B",
            "source.cluster.bootstrap.servers": kafka_bootstrap,
            "target.cluster.bootstrap.servers": cluster_b.bootstrap, "topics": topic, **ONE}
    for name, config in ((f"mirror-{run}", {"connector.class": "MirrorSourceConnector"}),
                         (f"checkpoints-{run}", {
                             "connector.class": "MirrorCheckpointConnector", "groups": group,
                             "emit.checkpoints.interval.seconds": "1",
                             "refresh.groups.interval.seconds": "1"})):
        answer = worker.request("POST", "/connectors",
                                {"name": name, "config": {**flow, **config}})
        assert answer.status_code == 201, answer.text

    make_user("replication-viewer")
    tab.login("replication-viewer", PASSWORD, then="/replication/")
    page = tab.page
    row = page.locator(f'tr[data-partition="{topic}-0"]')
    checkpoint = page.locator(f'tr[data-checkpoint="{group}/A.{topic}-0"]')
    # the first view may come before the first copy: the page catches up by itself
    expect(row.locator("[data-copied]")).to_have_text("20", timeout=90_000)
    expect(row.locator("[data-source-end]")).to_have_text("20")
    expect(row.locator("[data-target-end]")).to_have_text("20")
    expect(row.locator("[data-lag]")).to_have_text("0")
    expect(checkpoint.locator("[data-upstream]")).to_have_text("20", timeout=60_000)
    expect(checkpoint.locator("[data-downstream]")).to_have_text("20")
    expect(page.locator(f"#flow-mirror-{run} [data-state]").first).to_have_text("RUNNING")
    tab.snap("caught-up")
    page.evaluate("window.__notReloaded = true")

    # More records and a group that reads on: the open page follows, without a reload.
    _produce(kafka_bootstrap, topic, 20, 15)
    expect(row.locator("[data-source-end]")).to_have_text("35", timeout=60_000)
    expect(row.locator("[data-target-end]")).to_have_text("35", timeout=60_000)
    expect(row.locator("[data-copied]")).to_have_text("35", timeout=60_000)
    _consume(kafka_bootstrap, topic, group, 35)
    expect(checkpoint.locator("[data-upstream]")).to_have_text("35", timeout=60_000)
    expect(checkpoint.locator("[data-downstream]")).to_have_text("35")
    assert page.evaluate("window.__notReloaded") is True
    tab.snap("followed")
    wait_for(lambda: worker.request("DELETE", f"/connectors/mirror-{run}").status_code == 204,
             30, "the connector was not deleted")
    worker.request("DELETE", f"/connectors/checkpoints-{run}")
