"""The audit log page and the components it uses: newest first, server-side pagination
that keeps the search, and a search over user, action and target; each entry is its
cluster's, and the page shows the current cluster's unless asked for every cluster's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from clusterclient.clusters import KafkaCluster
from controlcenter import audit, clusters
from controlcenter.models import AuditEntry

pytestmark = pytest.mark.django_db


def actions_on(html: str) -> list[str]:
    return re.findall(r"<td><code>([^<]+)</code></td>", html)


def test_it_lists_entries_newest_first_fifty_per_page(client: Client) -> None:
    for n in range(120):
        audit.record(None, f"topic.create{n:03d}", f"topic t{n}", ok=True)
    first = client.get("/audit/").content.decode()
    assert actions_on(first)[:2] == ["topic.create119", "topic.create118"]
    assert len(actions_on(first)) == 50
    assert "1\u201350 of 120" in first
    last = client.get("/audit/?page=3").content.decode()
    assert actions_on(last)[-1] == "topic.create000"
    assert len(actions_on(last)) == 20
    # Out-of-range and malformed page numbers show a page, never an error.
    assert client.get("/audit/?page=99").status_code == 200
    assert client.get("/audit/?page=x").status_code == 200


def test_pagination_links_keep_the_search(client: Client) -> None:
    for n in range(60):
        audit.record(None, "broker.kill", f"broker {n}", ok=True)
    html = client.get("/audit/?q=broker").content.decode()
    assert 'href="?q=broker&amp;page=2"' in html


def test_it_searches_user_action_and_target_and_filters_by_result(client: Client) -> None:
    audit.record(None, "topic.create", "topic orders", ok=True)
    audit.record(None, "topic.delete", "topic payments", ok=False, message="UNKNOWN_TOPIC")
    audit.record(None, "group.reset_offsets", "group billing", ok=True)
    assert actions_on(client.get("/audit/?q=payments").content.decode()) == ["topic.delete"]
    assert actions_on(client.get("/audit/?q=TOPIC.").content.decode()) == [
        "topic.delete", "topic.create"]
    assert actions_on(client.get("/audit/?result=error").content.decode()) == ["topic.delete"]
    assert actions_on(client.get("/audit/?q=platform").content.decode()) == [
        "group.reset_offsets", "topic.delete", "topic.create"]
    assert "No entries match." in client.get("/audit/?q=nothing-like-it").content.decode()


def test_an_empty_log_says_so(client: Client) -> None:
    assert "Nothing has been changed" in client.get("/audit/").content.decode()


def test_audited_records_the_error_and_lets_it_through() -> None:
    with pytest.raises(ValueError, match="bad offset"), audit.audited(
        None, "group.reset_offsets", "group g", {"to": "earliest"}
    ) as note:
        note.parameters["dry_run"] = False
        raise ValueError("bad offset")
    entry = AuditEntry.objects.get()
    assert (entry.result, entry.message) == ("error", "bad offset")
    assert entry.parameters == {"to": "earliest", "dry_run": False}
    assert entry.username == "platform"


def test_targets_link_to_the_pages_of_what_they_name(client: Client) -> None:
    for target in ("topic orders", "group billing/eu", "broker 2", "run 7", "cluster",
                   "broker x"):
        audit.record(None, "some.action", target, ok=True)
    page = client.get("/audit/").content.decode()
    assert 'topic <a href="/topics/orders/">orders</a>' in page
    assert 'group <a href="/groups/billing/eu/">billing/eu</a>' in page
    assert 'broker <a href="/brokers/2/">2</a>' in page
    assert 'run <a href="/analytics/runs/7/">7</a>' in page
    assert "<td>cluster</td>" in page and "<td>broker x</td>" in page


def test_entries_are_their_clusters_and_the_log_shows_the_current_ones(
    client: Client, settings: Any
) -> None:
    settings.KAFKA_EXTRA_CLUSTERS = (KafkaCluster("backup", "127.0.0.1:9"),)
    default = clusters.default_name()
    audit.record(None, "topic.create", "topic here", ok=True)
    with clusters.using("backup"):  # a request on the second cluster, or its collector
        audit.record(None, "topic.delete", "topic there", ok=True)
    assert sorted(AuditEntry.objects.values_list("action", "cluster")) == [
        ("topic.create", default), ("topic.delete", "backup")]
    page = client.get("/audit/").content.decode()
    assert actions_on(page) == ["topic.create"]
    assert f"Cluster <strong>{default}</strong> only" in page
    every = client.get("/audit/", {"cluster": "all", "q": "topic"}).content.decode()
    assert actions_on(every) == ["topic.delete", "topic.create"]
    assert "<td>backup</td>" in every and f"<td>{default}</td>" in every
    assert '<input type="hidden" name="cluster" value="all">' in every  # the search keeps it
    unknown = client.get("/audit/", {"cluster": "nope"}).content.decode()
    assert actions_on(unknown) == ["topic.create"]
    assert "Cluster &#x27;nope&#x27; is not configured" in unknown
    assert actions_on(client.get("/audit/", {"cluster": "backup"}).content.decode()) == [
        "topic.delete"]
    # the switcher's choice stays: the log now shows the second cluster's
    assert actions_on(client.get("/audit/").content.decode()) == ["topic.delete"]
