"""The overview after one real collector cycle: what the collector wrote is what the page
shows, for a live cluster and for one that does not answer."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from django.test.utils import override_settings

from brokercluster.ports import free_port
from clusterclient import ClusterClient
from controlcenter.collector.loop import Collector, CollectorConfig


def collect_once(bootstrap: str) -> None:
    collector = Collector(CollectorConfig(bootstrap_servers=bootstrap, interval=2.0,
                                          history_topics=False))
    try:
        collector.cycle()
    finally:
        collector.close()


@pytest.mark.django_db(transaction=True)
def test_overview_shows_what_the_collector_sampled(kafka_bootstrap: str) -> None:
    topic = f"overview-{uuid.uuid4().hex[:8]}"
    ClusterClient(kafka_bootstrap).create_topic(topic, partitions=2)
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):
        collect_once(kafka_bootstrap)
        page = Client().get("/").content.decode()
        found = Client().get("/topics/", {"q": topic}).content.decode()
    assert 'id="broker-row-1"' in page and 'data-status="up"' in page
    assert "unreachable" not in page and f">{topic}<" in found


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_overview_of_an_unreachable_cluster_shows_a_banner() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=bootstrap):
        collect_once(bootstrap)
        response = Client().get("/")
    assert response.status_code == 200
    assert "The cluster is unreachable" in response.content.decode()
