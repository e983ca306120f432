"""Issue 21's streams on the page, in Chromium: a query started from the streams page with its
progress chart moving, and the built-in lag-anomaly query started from a group's page whose
alert is pushed to it. Each query is a real driver (a JVM) run by a real Celery worker; the
page's validation runs in the server's own Spark session.

Apart from `test_streams.py` (the same worker fixture and waits): these tests do not use the
tests' local Spark session, so they are no part of the unit that runs on it
(`SHARED_JVM_FILES` in tests/conftest.py) and run on the other pytest worker meanwhile. Most
of their time is waiting on JVMs in other processes (the server's session, two drivers).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from django.test import Client
from django.test.utils import override_settings
from playwright.sync_api import expect

from controlcenter.access import Capability
from controlcenter.streams.models import StreamQuery
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.conftest import PASSWORD, make_user
from tests.controlcenter.streams.test_streams import (  # fmt: skip
    SPARK_WAIT_S,
    analyst,
    committed_records,
    overrides,
    query_row,
    records,
    running_with_progress,
    wait_until,
    worker,
)
from tests.sparkkafka.topics import create_topic, produce

__all__ = ["analyst", "overrides", "worker"]
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def asgi_application() -> Any:
    """The platform's app, its Spark session (the web process's, for validation) starting in
    a thread meanwhile: the page's first validation waits for it (`sql.session` holds a lock)
    instead of starting the JVM then. The server starts with the module (`_server_early`):
    its JVM starts while the lag-anomaly test, which validates nothing, runs first."""
    from controlcenter.streams import sql
    from millrace.asgi import application

    threading.Thread(target=sql.session, name="spark-session", daemon=True).start()
    return application


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any, overrides: dict[str, Any],
           worker: Any) -> Iterator[LiveServer]:  # fmt: skip
    with django_db_blocker.unblock(), override_settings(**overrides), ExitStack() as stack:
        live = stack.enter_context(serve(asgi_application))
        yield live


@pytest.fixture(scope="module", autouse=True)
def _server_early(server: LiveServer) -> None:
    """The server, its Celery worker and its Spark session start with the module: the
    session's JVM starts while the lag-anomaly test runs, not in the first validation."""


@pytest.fixture
def tab(chromium: Any, server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:  # fmt: skip
    make_user("streamer", Capability.RUN_ANALYSES)
    browser = Browser(chromium, server, request.node.name)
    browser.login("streamer", PASSWORD, then="/streams/")
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


# --- the built-in lag-anomaly query ------------------------------------------------------------

def lagging_group(bootstrap: str, behind: int) -> tuple[str, str]:
    """A topic of 2 partitions and a group with no members `behind` records behind on it."""
    topic, group = create_topic(bootstrap, 2), f"lagging-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, topic, [(i % 2, None, b"v", None) for i in range(4 * behind)])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, p, (4 * behind - behind) // 2)
                             for p in (0, 1)], asynchronous=False)
    consumer.close()
    return topic, group


@contextmanager
def collecting(bootstrap: str) -> Iterator[None]:
    """The platform's collector, a cycle a second in a thread: the read model, the group's
    live page fragments and `_millrace-lag-samples`, as the platform writes them."""
    from controlcenter.collector.loop import Collector, CollectorConfig

    # Its cycles run in a thread of their own: pushes are sync-over-async, and this thread
    # runs Playwright's event loop.
    collector = Collector(CollectorConfig(bootstrap_servers=bootstrap, interval=1.0))
    stop = threading.Event()
    thread = threading.Thread(target=collector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
        collector.close()


def cycles_sampled(bootstrap: str, group: str) -> int:
    """How many collector cycles have written `group`'s samples to `_millrace-lag-samples`
    (what the lag-anomaly query reads: the read model's history keeps fewer points)."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError

    from laganalysis.records import LAG_SAMPLES_TOPIC

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4()}",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        described = consumer.list_topics(LAG_SAMPLES_TOPIC, timeout=10).topics[LAG_SAMPLES_TOPIC]
        consumer.assign([TopicPartition(LAG_SAMPLES_TOPIC, p, OFFSET_BEGINNING)
                         for p in described.partitions])
        ended: set[int] = set()
        cycles: set[int] = set()
        while len(ended) < len(described.partitions):
            message = consumer.poll(5)
            if message is None:
                break
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                continue
            sample = json.loads(message.value())
            if sample["group"] == group:
                cycles.add(sample["ts"])
        return len(cycles)
    finally:
        consumer.close()


@pytest.mark.timeout(900)  # a driver JVM start
def test_a_lagging_group_whose_lag_jumps_gets_an_alert_on_its_page(
    tab: Browser, kafka_bootstrap: str, analyst: Client
) -> None:
    from controlcenter.models import GroupLagHistory
    from controlcenter.streams.models import LagAlert, QueryKind

    topic, group = lagging_group(kafka_bootstrap, 10)
    with collecting(kafka_bootstrap):
        # The first cycle also creates the history topics the lag-anomaly query reads.
        wait_until(lambda: GroupLagHistory.objects.filter(group_id=group).exists(),
                   "the group sampled", 120)
        # Started from the group's own page, with the rule's defaults (k 3, 10 cycles).
        tab.visit(f"/groups/{group}/")
        alerts = tab.page.locator("#group-alerts")
        expect(alerts).to_contain_text("No lag-anomaly query is running")
        with tab.page.expect_navigation():
            tab.page.click("#lag-anomaly-start button")
        assert tab.page.url.endswith(f"/groups/{group}/")
        query = query_row("lag-anomalies")
        assert query.kind == QueryKind.LAG_ANOMALY and query.output_topic == "_millrace-lag-alerts"
        running_with_progress("lag-anomalies")
        expect(alerts).to_contain_text("Watched by lag-anomalies", timeout=60_000)
        # Ten cycles of a steady lag of 10 make the baseline; then the lag jumps to 210.
        wait_until(lambda: cycles_sampled(kafka_bootstrap, group) >= 12,
                   "a baseline of steady cycles")
        produce(kafka_bootstrap, topic, [(i % 2, None, b"v", None) for i in range(200)])
        # Pushed to the open page: no reload.
        expect(alerts.locator("[role=alert]")).to_contain_text(topic, timeout=SPARK_WAIT_S * 1000)
        tab.snap("lag-anomaly")
    # One alert: the group stays behind, so it stays raised (a cycle may have sampled the
    # 200 records half produced).
    alert = LagAlert.objects.get(group_id=group)
    assert (alert.topic, alert.state) == (topic, "RAISED") and 13 < alert.lag <= 210
    assert alert.mean == 10 and alert.stddev == 0 and alert.threshold == 13  # 10 + 3·max(0, 1, 1)
    assert analyst.delete("/api/v1/streams/queries/lag-anomalies").status_code == 204


@pytest.mark.timeout(900)  # the server's Spark session and a driver: two JVM starts
def test_a_query_started_from_the_page_shows_its_progress_chart_moving(
    tab: Browser, kafka_bootstrap: str
) -> None:
    source, output = create_topic(kafka_bootstrap, 2), create_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, source, records(source, 0, {"a": 10}))
    tab.visit("/streams/")
    tab.page.fill("[name=name]", "from-page")
    tab.page.fill("[name=sql]", f"SELECT CAST(key AS STRING) AS k, CAST(value AS STRING) AS v "
                                f"FROM {source.replace('-', '_')} WHERE key IS NOT NULL")
    tab.page.fill("[name=output_topic]", output)
    tab.page.fill("[name=key_column]", "k")
    # The server validates in its own Spark session: its first use starts a JVM.
    with tab.page.expect_navigation(timeout=SPARK_WAIT_S * 1000):
        tab.page.click("#stream-create-form button[type=submit]", timeout=SPARK_WAIT_S * 1000)
    assert tab.page.url.endswith("/streams/from-page/")
    state = tab.page.locator("#stream-state")
    expect(state).to_have_text("RUNNING", timeout=SPARK_WAIT_S * 1000)
    points = tab.page.locator("#stream-points")
    # More batches arrive while the page watches: the pushed points grow the chart.
    expect(tab.page.locator("#chart-rates .uplot canvas")).to_have_count(
        1, timeout=SPARK_WAIT_S * 1000)
    before = int(points.inner_text())
    produce(kafka_bootstrap, source, records(source, 30, {"b": 5}))
    wait_until(lambda: int(points.inner_text()) > before, "a progress point pushed", 120)
    tab.snap("running")
    expected = sorted([f"a-{i}" for i in range(10)] + [f"b-{i}" for i in range(5)])
    wait_until(lambda: len(committed_records(kafka_bootstrap, output)) >= len(expected),
               "every record in the output")
    assert sorted(row["v"] for _, row in committed_records(kafka_bootstrap, output)) == expected
    with tab.page.expect_navigation():
        tab.page.click("#delete-form button[type=submit]")
    assert not StreamQuery.objects.filter(name="from-page").exists()
