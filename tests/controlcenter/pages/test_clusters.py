"""The control center over two clusters: the session broker (the default) and a second
built-in cluster of this module (a one-broker `python -m brokercluster`). A collector per
cluster fills the read model, rows keyed by cluster; the pages show the cluster chosen with the
switcher (kept in the session), in the Django test client and in Chromium, and update live from
that cluster's collector; the lag metrics carry every cluster; a schedule runs on its own."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import confluent_kafka
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from confluent_kafka.admin import AdminClient, NewTopic
from django.conf import settings as django_settings
from django.db import connections
from django.test import Client, override_settings
from django.utils import timezone
from playwright.sync_api import expect
from prometheus_client.parser import text_string_to_metric_families

from brokercluster.ports import free_port
from clusterclient.clusters import KafkaCluster, connect_urls
from controlcenter import actions, clusters, events
from controlcenter.access import Capability
from controlcenter.collector.loop import Collector, CollectorConfig
from controlcenter.collector.metrics import serve as serve_metrics
from controlcenter.models import (
    AnalysisRun,
    ClusterState,
    GroupLagHistory,
    GroupPartitionLag,
    GroupState,
    TopicState,
)
from millrace.asgi import application
from tests.brokerproc import ClusterProcess
from tests.controlcenter.browser import Browser, serve
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db(transaction=True)
SECOND = "second"
LIVE_TIMEOUT_MS = 90_000  # a collector cycle and its push on a machine shared with other runs


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    with ClusterProcess(Path(tmp_path_factory.mktemp("second-cluster")), brokers=1) as cluster:
        yield cluster


@pytest.fixture
def two_clusters(settings: Any, second: ClusterProcess, kafka_bootstrap: str) -> str:
    """The default cluster and `second`, as MILLRACE_CLUSTERS would configure them."""
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap
    settings.MILLRACE_CLUSTER_DIR = str(Path(second.data_dir).parent / "no-supervisor")
    settings.KAFKA_EXTRA_CLUSTERS = (
        KafkaCluster(SECOND, second.bootstrap, supervisor_dir=str(second.data_dir)),)
    return second.bootstrap


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)


def lagging_group(bootstrap: str, topic: str, group: str) -> None:
    """`topic` with 10 records, `group` committed at 4: a lag of 6."""
    create_topic(bootstrap, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(20) == 0
    commit(bootstrap, topic, group, 4)


def commit(bootstrap: str, topic: str, group: str, offset: int) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, offset)],
                    asynchronous=False)
    consumer.close()


def in_thread(work: Callable[[], object]) -> None:
    """`work` on a thread of its own (Playwright's sync API keeps a loop on this one, where
    the collector's async_to_sync cannot run); its exception is raised here."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001  (handed to the test's thread)
            failed.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(180)
    assert not thread.is_alive() and not failed, failed


def collect(name: str, cluster: KafkaCluster | None = None, cycles: int = 2,
            live: bool = False, between: Callable[[], object] | None = None) -> Collector:
    """Cycles of the collector `manage.py collect --cluster name` runs (with its live
    pushes, all sent before it returns, when `live`), `between` them if given."""
    chosen = cluster or clusters.current()
    with clusters.using(name):
        collector = Collector(CollectorConfig(
            bootstrap_servers=chosen.bootstrap_servers, interval=2.0, cluster_name=name,
            supervisor_dir=Path(chosen.supervisor_dir) if chosen.supervisor_dir else None,
            history_topics=False, live_pushes=live))
        try:
            for cycle in range(cycles):
                if cycle and between is not None:
                    between()
                collector.cycle()
                time.sleep(0.2)
            assert collector.pusher.wait()
        finally:
            collector.close()
    return collector


def seeded(two_clusters: str, kafka_bootstrap: str) -> dict[str, str]:
    # One token in both topic names: the pages search for it, since the session broker holds
    # the topics of every test file this worker ran (more than a page of them).
    token = uuid.uuid4().hex[:8]
    names = {"first": f"first-{token}", "topic": f"second-{token}",
             "group": f"g2-{uuid.uuid4().hex[:8]}", "token": token}
    create_topic(kafka_bootstrap, names["first"])
    lagging_group(two_clusters, names["topic"], names["group"])
    configured = clusters.configured()
    collect(configured[0].name, configured[0], cycles=1)
    collect(SECOND, configured[1])
    return names


def test_the_collector_keys_rows_by_cluster_and_records_the_second_clusters_lag(
        two_clusters: str, kafka_bootstrap: str) -> None:
    names = seeded(two_clusters, kafka_bootstrap)
    assert not GroupState.objects.filter(group_id=names["group"]).exists()  # the default's
    with clusters.using(SECOND):
        group = GroupState.objects.get(group_id=names["group"])
        assert (group.total_lag, group.partitions) == (6, 1)
        lag = GroupPartitionLag.objects.get(group_id=names["group"])
        assert (lag.committed_offset, lag.end_offset, lag.lag) == (4, 10, 6)
        assert GroupLagHistory.objects.filter(group_id=names["group"]).exists()
        assert set(TopicState.objects.values_list("name", flat=True)) >= {names["topic"]}
        assert not TopicState.objects.filter(name=names["first"]).exists()
    assert TopicState.objects.filter(name=names["first"]).exists()
    assert set(GroupLagHistory._base_manager.filter(group_id=names["group"])
               .values_list("cluster", flat=True)) == {SECOND}


def test_the_pages_show_the_cluster_chosen_with_the_switcher(
        two_clusters: str, kafka_bootstrap: str, second: ClusterProcess) -> None:
    names = seeded(two_clusters, kafka_bootstrap)
    browser = Client()
    topics = browser.get("/topics/", {"q": names["token"]}).content.decode()
    assert names["first"] in topics and names["topic"] not in topics
    assert f'<option value="{SECOND}">' in topics and '<option value="millrace" selected>' in topics
    switched = browser.get("/topics/", {"cluster": SECOND, "q": names["token"]}).content.decode()
    assert names["topic"] in switched and names["first"] not in switched
    assert f'<option value="{SECOND}" selected>' in switched
    assert second.bootstrap in switched  # the cluster label says which cluster
    # the session keeps the choice from page to page
    assert names["topic"] in browser.get("/topics/").content.decode()
    group = browser.get(f"/groups/{names['group']}/").content.decode()
    assert names["topic"] in group and ">6<" in group.replace(" ", "")
    assert names["group"] in browser.get("/groups/").content.decode()
    brokers = browser.get("/brokers/").content.decode()
    assert second.bootstrap.rsplit(":", 1)[1] in brokers
    messages = browser.get(f"/topics/{names['topic']}/messages/").content.decode()
    assert "record-9" in messages
    # an unknown name changes nothing; the default's name switches back
    assert names["topic"] in browser.get("/topics/", {"cluster": "nope"}).content.decode()
    back = browser.get("/topics/", {"cluster": "millrace", "q": names["token"]}).content.decode()
    assert names["first"] in back and names["topic"] not in back


def test_an_analysis_launched_on_the_second_cluster_is_that_clusters(
        two_clusters: str, kafka_bootstrap: str,
        django_capture_on_commit_callbacks: Any) -> None:
    """Its names are checked against that cluster and its job reads that cluster's
    history (execute.py takes the run's `cluster`)."""
    names = seeded(two_clusters, kafka_bootstrap)
    analyst = Client()
    assert analyst.login(username=make_user("analyst", Capability.RUN_ANALYSES).username,
                         password=PASSWORD)
    launch = {"job": "hot_partitions", "topics": [names["topic"]]}
    on_default = analyst.post("/api/v1/analysis", launch, content_type="application/json")
    assert on_default.status_code == 400 and names["topic"] in on_default.json()["message"]
    analyst.get("/", {"cluster": SECOND})
    with django_capture_on_commit_callbacks():
        launched = analyst.post("/api/v1/analysis", launch, content_type="application/json")
    assert launched.status_code == 202, launched.content
    run = AnalysisRun.objects.get(pk=launched.json()["id"])
    assert run.cluster == SECOND and launched.json()["cluster"] == SECOND


def test_the_lag_metrics_carry_every_cluster_by_its_label(
        two_clusters: str, kafka_bootstrap: str) -> None:
    """One endpoint, as kafka-lag-exporter's with several clusters: the default collector's
    own cluster from its cycle, the second's from the read model its collector wrote."""
    names = seeded(two_clusters, kafka_bootstrap)
    default = collect(clusters.configured()[0].name, clusters.configured()[0], cycles=1)
    port = free_port()
    server = serve_metrics(default.metrics, "127.0.0.1", port)

    def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
            text = answer.read().decode()
        return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples}

    try:
        samples = scrape()
        # a collector that stopped writing: its cluster's series go, not its last values
        ClusterState.objects.filter(bootstrap_servers=two_clusters).update(
            collected_at=timezone.now() - dt.timedelta(minutes=10))
        stale = scrape()
    finally:
        server.shutdown()
    assert not [key for key in stale if ("cluster_name", SECOND) in key[1]]
    assert [key for key in stale if ("cluster_name", "millrace") in key[1]]
    text = str(sorted(samples))

    def value(name: str, **labels: str) -> float | None:
        return samples.get((name, tuple(sorted(labels.items()))))

    member = {"member_host": "", "consumer_id": "", "client_id": ""}
    assert value("kafka_consumergroup_group_lag", cluster_name=SECOND, group=names["group"],
                 topic=names["topic"], partition="0", **member) == 6.0, text[:2000]
    assert value("kafka_consumergroup_group_sum_lag", cluster_name=SECOND,
                 group=names["group"]) == 6.0
    assert value("kafka_partition_latest_offset", cluster_name=SECOND, topic=names["topic"],
                 partition="0") == 10.0
    assert value("kafka_partition_latest_offset", cluster_name="millrace",
                 topic=names["first"], partition="0") == 0.0
    assert value("kafka_partition_latest_offset", cluster_name=SECOND,
                 topic=names["first"], partition="0") is None  # the default's only


def test_the_connect_page_talks_to_the_viewed_clusters_worker(
        two_clusters: str, settings: Any, tmp_path: Path) -> None:
    """Control Center's `confluent.controlcenter.connect.<name>.cluster` line gives the second
    cluster its worker (the first of its URLs); a cluster without one says which settings
    name it; a line for no configured cluster is refused."""
    port = free_port()  # nothing listens: the page names the worker it asked
    c3 = tmp_path / "c3.properties"
    c3.write_text(f"confluent.controlcenter.connect.{SECOND}.cluster="
                  f"http://127.0.0.1:{port}/,http://127.0.0.1:{free_port()}\n")
    settings.KAFKA_CONNECT_URLS = connect_urls("", str(c3))
    browser = Client()
    page = browser.get("/connect/", {"cluster": SECOND}).content.decode()
    assert f"Kafka Connect at http://127.0.0.1:{port} did not answer" in page
    default = browser.get("/connect/", {"cluster": "millrace"}).content.decode()
    assert django_settings.MILLRACE_CONNECT_URL in default and str(port) not in default
    settings.KAFKA_CONNECT_URLS = {}
    none = browser.get("/connect/", {"cluster": SECOND}).content.decode()
    assert f"No Kafka Connect worker is configured for cluster {SECOND}" in none
    settings.KAFKA_CONNECT_URLS = connect_urls("dr=http://127.0.0.1:1", "")
    with pytest.raises(ValueError, match="Kafka Connect URLs for dr: no such cluster"):
        clusters.configured()


def test_a_schedule_saved_on_the_second_cluster_launches_there(
        two_clusters: str, kafka_bootstrap: str,
        django_capture_on_commit_callbacks: Any) -> None:
    """Beat's process looks at the default cluster; the schedule keeps its own."""
    names = seeded(two_clusters, kafka_bootstrap)
    analyst = Client()
    assert analyst.login(username=make_user("analyst", Capability.RUN_ANALYSES).username,
                         password=PASSWORD)
    analyst.get("/", {"cluster": SECOND})
    made = analyst.post("/api/v1/analysis/schedules", {
        "name": "hot-second", "job": "hot_partitions", "topics": [names["topic"]],
        "every_minutes": 5}, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["cluster"] == SECOND and "cluster" not in made.json()["parameters"]
    with django_capture_on_commit_callbacks():
        (run,) = actions.launch_due_analyses()  # as beat runs it: on the default cluster
    assert run.cluster == SECOND
    assert run.parameters["topics"] == [names["topic"]]


async def test_each_clusters_pushes_reach_only_that_clusters_pages(
        two_clusters: str, kafka_bootstrap: str) -> None:
    """A socket joins its session's cluster's groups: the second cluster's collector reaches
    a page of the second cluster and not the default's, and the other way round; a resync
    brings the second cluster's rows."""
    names = await sync_to_async(seeded)(two_clusters, kafka_bootstrap)
    name = f"test-{uuid.uuid4().hex[:12]}"
    layers = {"default": {"BACKEND": "millrace.channelhub.HubChannelLayer",
                          "CONFIG": {"data_dir": str(django_settings.DATA_DIR), "name": name}}}
    with override_settings(CHANNEL_LAYERS=layers):
        browser = Client()
        await sync_to_async(browser.get)("/", {"cluster": SECOND})
        cookie = f"sessionid={browser.cookies['sessionid'].value}".encode()
        pages = []
        for headers in ([], [(b"cookie", cookie)]):
            page = WebsocketCommunicator(application, "/ws/live/?topics=overview", headers=[
                (b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000"), *headers])
            assert (await page.connect(timeout=10))[0]
            pages.append(page)
        for pushed, hears, deaf in (("default", pages[0], pages[1]),
                                    (SECOND, pages[1], pages[0])):
            with clusters.using("" if pushed == "default" else SECOND):
                await events.asend_all([(events.group_name("overview", None),
                                         events.fragment_message("brokers", pushed))])
            assert json.loads(await hears.receive_from(timeout=10))["html"] == pushed
            assert await deaf.receive_nothing(timeout=0.5)
        for page in pages:
            await page.disconnect()
        group = quote(f"group.{names['group']}")
        resync = WebsocketCommunicator(
            application, f"/ws/live/?topics={group}&resync=1",
            headers=[(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000"),
                     (b"cookie", cookie)])
        assert (await resync.connect(timeout=10))[0]
        texts: list[dict[str, Any]] = []
        while not any(t.get("id") == "group-summary" for t in texts) and len(texts) < 8:
            texts.append(json.loads(await resync.receive_from(timeout=10)))
        summary = next(t for t in texts if t.get("id") == "group-summary")
        assert 'data-field="total-lag">6<' in summary["html"]
        await resync.disconnect()


# Last: Playwright's sync API keeps a loop on this thread, where async tests cannot run.
def test_the_switcher_in_chromium(chromium: Any, transactional_db: None, second: ClusterProcess,
                                  kafka_bootstrap: str, two_clusters: str,
                                  request: pytest.FixtureRequest) -> None:
    names = seeded(two_clusters, kafka_bootstrap)
    extra = [{"name": SECOND, "bootstrap_servers": second.bootstrap}]  # JSON for the server
    with serve("millrace.asgi:application", KAFKA_EXTRA_CLUSTERS=extra) as server:
        tab = Browser(chromium, server, request.node.name)
        try:
            tab.visit(f"/topics/?q={names['token']}")
            assert tab.page.locator(f"text={names['first']}").count() >= 1
            with tab.page.expect_navigation():
                tab.page.select_option("#cluster-switcher", SECOND)
            tab.snap("switched")
            assert tab.page.locator(f"text={names['topic']}").count() >= 1
            assert tab.page.locator(f"text={names['first']}").count() == 0
            tab.visit("/groups/")  # the choice stays with the session
            assert tab.page.locator(f"text={names['group']}").count() >= 1
            assert tab.page.eval_on_selector("#cluster-switcher", "e => e.value") == SECOND
            # the group page of the second cluster updates live from that cluster's collector
            tab.visit(f"/groups/{names['group']}/")
            total = tab.page.locator("#group-summary [data-field=total-lag]")
            expect(total).to_have_text("6")
            expect(tab.page.locator("#live-indicator")).to_have_attribute(
                "data-state", "live", timeout=LIVE_TIMEOUT_MS)
            # a first cycle pushes the page groups; the group's own after its commit
            configured = clusters.configured()
            in_thread(lambda: collect(SECOND, configured[1], cycles=2, live=True, between=(
                lambda: commit(second.bootstrap, names["topic"], names["group"], 9))))
            expect(total).to_have_text("1", timeout=LIVE_TIMEOUT_MS)
            tab.snap("pushed")
            assert not tab.errors, tab.errors
        finally:
            tab.close()
