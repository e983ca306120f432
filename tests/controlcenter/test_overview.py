"""The overview page through the real Django test client, reading through clusterclient."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from django.test.utils import override_settings

from brokercluster.ports import free_port
from clusterclient import ClusterClient


@pytest.mark.django_db
def test_overview_shows_brokers_and_partitions(kafka_bootstrap: str) -> None:
    topic = f"overview-{uuid.uuid4().hex[:8]}"
    ClusterClient(kafka_bootstrap).create_topic(topic, partitions=2)
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap):
        page = Client().get("/").content.decode()
    assert "controller" in page and topic in page and "Cluster unreachable" not in page


@pytest.mark.django_db
@pytest.mark.timeout(60)
def test_overview_of_an_unreachable_cluster_shows_a_banner() -> None:
    with override_settings(KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{free_port()}"):
        response = Client().get("/")
    assert response.status_code == 200 and "Cluster unreachable" in response.content.decode()
