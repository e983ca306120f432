"""The Consumer groups pages and their JSON API read the collector's tables: list (search,
sort, pagination), one group with members, per-partition lag and history, and refusals of
every change to anonymous users and users without the permission."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from controlcenter.access import Capability
from controlcenter.models import (
    AuditEntry,
    BurrowStatus,
    GroupLagHistory,
    GroupPartitionLag,
    GroupState,
)
from tests.controlcenter.cluster_snapshot import seed
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cluster(settings: SettingsWrapper, kafka_bootstrap: str) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap


def seed_groups(count: int) -> None:
    now = timezone.now()
    GroupState.objects.bulk_create(
        GroupState(group_id=f"app-{i:03}", state="Empty", members=0, total_lag=i, max_lag=i,
                   max_lag_seconds=float(i), status=BurrowStatus.OK, updated_at=now)
        for i in range(count))


def seed_lagging_group() -> None:
    now = timezone.now()
    GroupState.objects.create(group_id="billing/eu", state="Stable", members=1, topics=1,
                              partitions=2, total_lag=150, max_lag=100, max_lag_seconds=42.5,
                              status=BurrowStatus.WARN, updated_at=now)
    for p, lag in ((0, 100), (1, 50)):
        GroupPartitionLag.objects.create(
            group_id="billing/eu", topic="orders", partition=p, committed_offset=10,
            end_offset=10 + lag, lag=lag, lag_seconds=42.5 if p == 0 else None,
            status=BurrowStatus.WARN if p == 0 else BurrowStatus.OK,
            consumer_id="consumer-1-abc", client_id="billing-worker", host="/127.0.0.1",
            updated_at=now)
    for minutes in (90, 30, 10, 1):
        GroupLagHistory.objects.create(group_id="billing/eu",
                                       ts=now - dt.timedelta(minutes=minutes),
                                       total_lag=minutes, max_lag=minutes,
                                       max_lag_seconds=1.0, status=BurrowStatus.OK)


def test_the_group_list_sorts_searches_and_paginates_on_the_server(client: Client) -> None:
    seed()
    seed_groups(120)
    first = client.get("/groups/").content.decode()
    # Seeded "stuck" (ERR) comes first: groups in trouble lead the default order.
    assert first.index(">stuck<") < first.index(">app-119<") < first.index(">app-118<")
    assert first.count("<tr data-group=") == 50 and 'id="group-table"' in first
    assert 'data-live-topics="groups"' in first
    third = client.get("/groups/?page=3").content.decode()
    assert third.count("<tr data-group=") == 22  # 122 groups
    assert 'id="group-table-static"' in third and 'data-live-topics=""' in third
    found = client.get("/groups/?q=app-11").content.decode()
    assert found.count("<tr data-group=") == 10
    by_lag = client.get("/groups/?sort=-lag").content.decode()
    assert by_lag.index(">app-119<") < by_lag.index(">app-070<")
    by_name = client.get("/groups/?sort=group").content.decode()
    assert by_name.index(">app-000<") < by_name.index(">app-001<")
    assert 'aria-sort="descending"' in by_lag
    assert client.get("/groups/?sort=nonsense").status_code == 200


def test_a_group_shows_members_partition_lag_and_its_history(client: Client) -> None:
    seed()
    seed_lagging_group()
    html = client.get("/groups/billing/eu/").content.decode()
    assert 'data-live-topics="group.billing/eu"' in html
    partitions = html[html.index('id="group-partitions"'):]
    assert partitions.count("<tr data-partition=") == 2
    assert "badge-warn" in partitions and "42.5" in partitions
    members = html[html.index('id="group-members"'):html.index('id="group-partitions"')]
    assert "consumer-1-abc" in members and "orders-0, orders-1" in members
    assert '"lag": [30, 10, 1]' in html  # the 1 h window leaves out the 90-minute point
    week = client.get("/groups/billing/eu/?window=7d").content.decode()
    assert '"lag": [90, 30, 10, 1]' in week
    assert client.get("/groups/nope/").status_code == 404


def test_the_group_api_serves_what_the_pages_show(client: Client) -> None:
    seed()
    seed_lagging_group()
    listing = client.get("/api/v1/groups").json()
    assert listing["count"] == 3 and listing["results"][0]["group_id"] == "stuck"  # ERR
    by_lag = client.get("/api/v1/groups?sort=-lag").json()
    assert by_lag["results"][0]["group_id"] == "billing/eu"
    one = client.get("/api/v1/groups/billing/eu").json()
    assert one["status"] == "WARN" and one["max_lag_seconds"] == 42.5
    assert [p["lag"] for p in one["partition_lags"]] == [100, 50]
    assert one["members_detail"][0]["assignment"] == ["orders-0", "orders-1"]
    history = client.get("/api/v1/groups/billing/eu/history?window=15m").json()
    assert history["lag"] == [10, 1]
    assert client.get("/api/v1/groups/nope").status_code == 404
    assert "/api/v1/groups/{group_id}/reset-offsets" in client.get(
        "/api/v1/schema/", HTTP_ACCEPT="application/json").content.decode()


def test_anonymous_users_and_users_without_the_permission_change_no_group(
        client: Client) -> None:
    seed()
    seed_lagging_group()
    body = {"mode": "to-earliest", "execute": "1"}
    for url in ("/groups/+reset/billing/eu/", "/groups/+delete/billing/eu/"):
        response = client.post(url, body | {"confirm": "billing/eu"})
        assert response.status_code == 302 and "/login/" in response["Location"]
    assert client.get("/groups/+delete/billing/eu/").status_code == 405
    api = client.post("/api/v1/groups/billing/eu/reset-offsets",
                      {"mode": "to-earliest", "dry_run": False}, content_type="application/json")
    assert api.status_code == 403  # anonymous: refused, with a JSON body
    assert client.delete("/api/v1/groups/billing/eu").status_code == 403
    make_user("viewer")
    client.login(username="viewer", password=PASSWORD)
    assert client.post("/groups/+reset/billing/eu/", body).status_code == 403
    assert client.post("/groups/+delete/billing/eu/", {"confirm": "x"}).status_code == 403
    assert client.delete("/api/v1/groups/billing/eu").status_code == 403
    assert not AuditEntry.objects.exists()
    assert GroupState.objects.filter(group_id="billing/eu").exists()


def test_the_reset_form_explains_what_a_mode_needs(client: Client) -> None:
    seed()
    make_user("ops", Capability.CHANGE_GROUPS)
    client.login(username="ops", password=PASSWORD)
    html = client.get("/groups/+reset/calm/").content.decode()
    assert "to-datetime" in html and "by-duration" in html
    for mode, field in (("to-offset", "offset"), ("shift-by", "shift"),
                        ("to-datetime", "datetime"), ("by-duration", "duration")):
        response = client.post("/groups/+reset/calm/", {"mode": mode})
        assert response.status_code == 400
        assert f"{mode} needs a value here." in response.content.decode(), field
    response = client.post("/groups/+reset/calm/", {"mode": "by-duration", "duration": "soon"})
    assert "Not a positive duration" in response.content.decode()
