"""Consumer groups of both protocols through the collector, the pages and the JSON API: a
KIP-848 group (`group.protocol=consumer`) on the built-in broker is sampled with its type,
state, members and lag as a classic group is, and shown as `consumer` with its real state."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from django.test import Client
from playwright.sync_api import expect

from controlcenter.models import GroupPartitionLag, GroupState
from tests.controlcenter.browser import Browser
from tests.controlcenter.collector.test_collector import (
    collector_for,
    create_topic,
    own_hub,
    produce,
)
from tests.controlcenter.pages.test_group_browser import cluster_server, collector, tab, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
# Fixtures of the collector tests (a channel-layer hub of its own) and the browser tests.
__all__ = ["cluster_server", "collector", "own_hub", "tab"]

TOPIC_PARTITIONS = 2


class Member:
    """One confluent-kafka consumer of `protocol` that reads `count` records and commits."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str) -> None:
        self.consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "client.id": f"{protocol}-app", "auto.offset.reset": "earliest",
            "enable.auto.commit": False})
        self.consumer.subscribe([topic])

    def consume(self, count: int) -> None:
        seen, deadline = 0, time.monotonic() + 30
        while seen < count and time.monotonic() < deadline:
            message = self.consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == count

    def consume_and_commit(self, count: int) -> None:
        self.consume(count)
        self.consumer.commit(asynchronous=False)


@pytest.fixture
def members(kafka_bootstrap: str) -> Iterator[dict[str, tuple[str, Member]]]:
    """A classic and a consumer-protocol group on one topic, each 3 records behind."""
    topic = f"kinds-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=TOPIC_PARTITIONS)
    produce(kafka_bootstrap, topic, 10, partitions=TOPIC_PARTITIONS)
    found, suffix = {}, uuid.uuid4().hex[:8]
    for protocol in ("classic", "consumer"):
        group = f"{protocol}-{suffix}"
        member = Member(kafka_bootstrap, topic, group, protocol)
        member.consume_and_commit(10)
        found[protocol] = (group, member)
    produce(kafka_bootstrap, topic, 6, partitions=TOPIC_PARTITIONS)
    yield found
    for _, member in found.values():
        member.consumer.close()


def test_the_collector_samples_a_consumer_protocol_group_as_a_classic_one(
        kafka_bootstrap: str, members: dict[str, tuple[str, Member]]) -> None:
    collector = collector_for(kafka_bootstrap)
    try:
        collector.cycle()
        rows = {p: GroupState.objects.get(group_id=g) for p, (g, _) in members.items()}
        for protocol, row in rows.items():
            assert (row.group_type, row.state, row.members) == (protocol, "STABLE", 1)
            assert (row.total_lag, row.partitions) == (6, TOPIC_PARTITIONS)
            lags = GroupPartitionLag.objects.filter(group_id=row.group_id)
            assert {p.client_id for p in lags} == {f"{protocol}-app"}  # the owning member
        assert rows["consumer"].protocol == "uniform"  # the broker's server-side assignor
        assert rows["consumer"].reconciling == 0  # its member owns its target
        assert rows["consumer"].status == rows["classic"].status  # Burrow's rules, alike

        group, member = members["consumer"]
        member.consumer.close()  # leaves the group at once (member epoch -1)
        collector.cycle()
        left = GroupState.objects.get(group_id=group)
        assert (left.group_type, left.state, left.members, left.total_lag) == (
            "consumer", "EMPTY", 0, 6)
    finally:
        collector.close()


def test_a_group_of_either_protocol_is_notfound_until_its_first_commit_is_sampled(
        client: Client, kafka_bootstrap: str) -> None:
    """Burrow knows a group by its commits: a new group that consumes but has not committed
    yet is NOTFOUND with unknown lag, whatever its protocol, and OK once it commits. (A
    KIP-848 group once showed NOTFOUND beside an OK classic twin: the collector had sampled
    it between its join and its first commit, which the twin had already made.)"""
    topic = f"fresh-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, partitions=TOPIC_PARTITIONS)
    produce(kafka_bootstrap, topic, 10, partitions=TOPIC_PARTITIONS)
    groups = {protocol: f"fresh-{protocol}-{uuid.uuid4().hex[:6]}"
              for protocol in ("classic", "consumer")}
    consumers = {p: Member(kafka_bootstrap, topic, g, p) for p, g in groups.items()}
    collector = collector_for(kafka_bootstrap)
    try:
        for member in consumers.values():
            member.consume(10)
        collector.cycle()
        for group in groups.values():
            row = GroupState.objects.get(group_id=group)
            assert (row.status, row.members, row.partitions) == ("NOTFOUND", 1, TOPIC_PARTITIONS)
            lags = GroupPartitionLag.objects.filter(group_id=group)
            assert {(p.committed_offset, p.status) for p in lags} == {(None, "NOTFOUND")}
            page = client.get(f"/groups/{group}/").content.decode()
            partitions = page[page.index('id="group-partitions"'):]
            assert partitions.count('<td class="num" data-field="lag">—</td>') == TOPIC_PARTITIONS
            assert "NOTFOUND: no committed offset sampled" in page and ">NO COMMITS<" in page

        for member in consumers.values():
            member.consumer.commit(asynchronous=False)
        collector.cycle()
        for group in groups.values():
            row = GroupState.objects.get(group_id=group)
            assert (row.status, row.total_lag) == ("OK", 0)
    finally:
        collector.close()
        for member in consumers.values():
            member.consumer.close()


def test_the_groups_page_and_api_show_the_type_and_the_real_state(
        client: Client, kafka_bootstrap: str, members: dict[str, tuple[str, Member]]) -> None:
    collector = collector_for(kafka_bootstrap)
    try:
        collector.cycle()
    finally:
        collector.close()
    classic, consumer = members["classic"][0], members["consumer"][0]

    listed = client.get("/groups/?sort=-type").content.decode()
    for group, protocol in ((classic, "classic"), (consumer, "consumer")):
        row = listed.split(f'data-group="{group}"')[1].split("</tr>")[0]
        assert f"<td>{protocol}</td><td>STABLE</td>" in row
    assert listed.index(consumer) < listed.index(classic)  # sorted by type, descending
    page = client.get(f"/groups/{consumer}/").content.decode()
    assert 'data-field="type">consumer<' in page and 'data-field="state">STABLE<' in page
    assert 'data-field="reconciling">0<' in page
    assert "consumer-app" in page  # the member and its assigned partitions

    api = client.get(f"/api/v1/groups/{consumer}").json()
    assert (api["type"], api["state"], api["protocol"], api["reconciling"]) == (
        "consumer", "STABLE", "uniform", 0)
    assert {m["client_id"] for m in api["members_detail"]} == {"consumer-app"}
    assert len(api["members_detail"][0]["assignment"]) == TOPIC_PARTITIONS
    types = {g["group_id"]: g["type"] for g in client.get(
        "/api/v1/groups", {"q": consumer}).json()["results"]}
    assert types == {consumer: "consumer"}


def test_the_groups_list_in_a_browser_shows_a_classic_and_a_consumer_group(
        tab: Browser, collector: None, members: dict[str, tuple[str, Member]]) -> None:
    classic, consumer = members["classic"][0], members["consumer"][0]
    wait_for(tab.page, lambda: GroupState.objects.filter(
        group_id__in=[classic, consumer]).count() == 2, "the collector sees both groups")
    tab.visit(f"/groups/?q={classic.split('-')[1]}&sort=type")
    tab.snap("groups-of-both-protocols")
    for group, protocol in ((classic, "classic"), (consumer, "consumer")):
        cells = tab.page.locator(f'tr[data-group="{group}"] td')
        expect(cells.nth(2)).to_have_text(protocol)
        expect(cells.nth(3)).to_have_text("STABLE")
    tab.visit(f"/groups/{consumer}/")
    tab.snap("consumer-group")
    expect(tab.page.locator('#group-summary [data-field="type"]')).to_have_text("consumer")
