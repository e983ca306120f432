"""The Overview, Brokers and Topics pages read the collector's tables: what they show,
search and pagination, and the unreachable-cluster banner."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from tests.controlcenter.cluster_snapshot import seed

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cluster(settings: SettingsWrapper, kafka_bootstrap: str) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap


def test_the_overview_shows_brokers_health_and_groups_in_trouble_first(client: Client) -> None:
    seed()
    html = client.get("/").content.decode()
    assert len(re.findall(r'<tr id="broker-row-\d"', html)) == 3
    assert 'data-status="down"' in html and "<strong>controller</strong>" in html
    assert html.index("stuck") < html.index("calm")  # ERR before OK
    assert html.index(">orders<") < html.index(">__consumer_offsets<")  # internal last
    assert 'data-count="under-replicated">2<' not in html  # the cluster row's own count
    assert "50%" in html  # preferred-leader ratio
    assert 'data-live-topics="overview brokers"' in html


def test_every_page_says_when_the_cluster_is_unreachable(client: Client) -> None:
    seed(reachable=False)
    for url in ("/", "/brokers/", "/brokers/1/", "/topics/", "/topics/orders/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "The cluster is unreachable" in response.content.decode(), url


def test_without_a_snapshot_the_pages_say_the_collector_has_not_run(client: Client) -> None:
    for url in ("/", "/brokers/", "/topics/"):
        assert "collector" in client.get(url).content.decode()


def test_the_topic_list_searches_sorts_and_paginates_on_the_server(client: Client) -> None:
    seed({f"t{i:03}": 1 for i in range(120)} | {"__internal": 1, "big": 40})
    first = client.get("/topics/").content.decode()
    assert first.count('<tr class="') == 50 and "__internal" not in first
    third = client.get("/topics/?page=3").content.decode()
    assert third.count('<tr class="') == 21  # 121 user topics
    found = client.get("/topics/?q=t11").content.decode()
    assert found.count('<tr class="') == 10
    assert "__internal" in client.get("/topics/?q=internal").content.decode()
    by_partitions = client.get("/topics/?sort=-partitions").content.decode()
    assert by_partitions.index(">big<") < by_partitions.index(">t000<")


def test_a_topic_shows_partitions_leadership_and_its_configs_error(client: Client) -> None:
    seed()
    html = client.get("/topics/orders/").content.decode()
    partitions = html[html.index('id="topic-partitions"'):]
    assert partitions.count("<tr data-partition=") == 3
    assert "under-replicated" in partitions
    leadership = html[html.index('id="topic-map"'):html.index('id="topic-partitions"')]
    assert leadership.count("map-leader") == 3 and leadership.count("map-out") == 1
    # The seeded topic does not exist on the real broker: its own words, not a 500.
    assert "UNKNOWN_TOPIC_OR_PART" in html
    assert client.get("/topics/nope/").status_code == 404


def test_a_broker_page_shows_what_it_leads(client: Client) -> None:
    seed()
    html = client.get("/brokers/1/").content.decode()
    assert "Partitions it leads" in html and html.count('<tr class=""><td><a href="/topics/') + \
        html.count('<tr class="warn"><td><a href="/topics/') == 3
    assert "Broker 3 is down" in client.get("/brokers/3/").content.decode()
    assert client.get("/brokers/9/").status_code == 404
