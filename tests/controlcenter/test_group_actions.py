"""Resetting and deleting consumer groups on the built-in broker, through the pages, the
JSON API and actions: every kafka-consumer-groups mode, the dry run that changes nothing, the
refusal while members are active, the audit log, and the seconds from the group's history."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import confluent_kafka
import pytest
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from clusterclient import ClusterClient, TopicPartition
from controlcenter import actions
from controlcenter.access import Capability
from controlcenter.models import AuditEntry, BurrowStatus, PartitionLagHistory
from controlcenter.offsetreset import ResetMode, ResetSpec, plan_reset
from tests.controlcenter.collector.test_collector import create_topic, produce
from tests.controlcenter.conftest import PASSWORD, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cluster(settings: SettingsWrapper, kafka_bootstrap: str) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap


@pytest.fixture
def admin(kafka_bootstrap: str) -> ClusterClient:
    return ClusterClient(kafka_bootstrap, timeout=10)


@pytest.fixture
def ops(client: Client) -> Client:
    make_user("ops", Capability.CHANGE_GROUPS)
    client.login(username="ops", password=PASSWORD)
    return client


def committed_group(admin: ClusterClient, bootstrap: str, offsets: tuple[int, int]
                    ) -> tuple[str, str]:
    """A topic with 10 records in each of 2 partitions, and an Empty group committed at
    `offsets`."""
    topic, group = f"reset-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, 20, partitions=2)
    admin.alter_group_offsets(group, {TopicPartition(topic, p): o
                                      for p, o in enumerate(offsets)})
    return topic, group


def committed(admin: ClusterClient, group: str) -> list[int]:
    return [o for _, o in sorted(admin.committed_offsets(group).items())]


def test_every_mode_plans_the_offsets_the_tool_would(admin: ClusterClient,
                                                     kafka_bootstrap: str) -> None:
    topic, group = committed_group(admin, kafka_bootstrap, (4, 8))

    def targets(spec: ResetSpec) -> list[int]:
        return [p.target for p in plan_reset(admin, group, spec).partitions]

    assert targets(ResetSpec(ResetMode.EARLIEST)) == [0, 0]
    assert targets(ResetSpec(ResetMode.LATEST)) == [10, 10]
    assert targets(ResetSpec(ResetMode.TO_OFFSET, offset=6)) == [6, 6]
    assert targets(ResetSpec(ResetMode.TO_OFFSET, offset=99)) == [10, 10]  # clamped
    assert targets(ResetSpec(ResetMode.SHIFT_BY, shift=-5)) == [0, 3]  # clamped at start
    assert targets(ResetSpec(ResetMode.SHIFT_BY, shift=3)) == [7, 10]
    past = timezone.now() - dt.timedelta(hours=1)
    assert targets(ResetSpec(ResetMode.TO_DATETIME, at=past)) == [0, 0]
    future = timezone.now() + dt.timedelta(hours=1)
    assert targets(ResetSpec(ResetMode.TO_DATETIME, at=future)) == [10, 10]
    assert targets(ResetSpec(ResetMode.BY_DURATION, duration=dt.timedelta(days=1))) == [0, 0]
    plan = plan_reset(admin, group, ResetSpec(ResetMode.EARLIEST, topic=topic))
    assert [(p.moved, p.lag_before, p.lag_after) for p in plan.partitions] == [
        (-4, 6, 10), (-8, 2, 10)]
    assert plan.may_execute and plan.state == "EMPTY"
    assert committed(admin, group) == [4, 8]  # planning changed nothing


def test_the_dry_run_shows_the_effect_and_execute_commits_it(
        ops: Client, admin: ClusterClient, kafka_bootstrap: str) -> None:
    topic, group = committed_group(admin, kafka_bootstrap, (4, 8))
    url = f"/groups/+reset/{group}/"
    dry = ops.post(url, {"mode": "shift-by", "shift": "-2", "topic": topic, "execute": "0"})
    html = dry.content.decode()
    assert dry.status_code == 200 and 'id="reset-plan"' in html
    assert html.count('data-field="moved">-2<') == 2 and 'id="reset-execute"' in html
    assert committed(admin, group) == [4, 8] and not AuditEntry.objects.exists()
    done = ops.post(url, {"mode": "shift-by", "shift": "-2", "topic": topic, "execute": "1"})
    assert done.status_code == 302 and done["Location"] == f"/groups/{group}/"
    assert committed(admin, group) == [2, 6]
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.username, entry.result) == ("group.reset_offsets", "ops", "ok")
    assert entry.parameters["mode"] == "shift-by" and "2 partitions reset" in entry.message


def test_the_api_resets_with_a_dry_run_by_default(ops: Client, admin: ClusterClient,
                                                  kafka_bootstrap: str) -> None:
    _, group = committed_group(admin, kafka_bootstrap, (4, 8))
    url = f"/api/v1/groups/{group}/reset-offsets"
    dry = ops.post(url, {"mode": "to-latest"}, content_type="application/json").json()
    assert dry["executed"] is False and [p["target"] for p in dry["partitions"]] == [10, 10]
    assert committed(admin, group) == [4, 8]
    done = ops.post(url, {"mode": "to-offset", "offset": 5, "dry_run": False},
                    content_type="application/json").json()
    assert done["executed"] is True and committed(admin, group) == [5, 5]
    bad = ops.post(url, {"mode": "shift-by"}, content_type="application/json")
    assert bad.status_code == 400 and "shift" in bad.json()["fields"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_reset_is_refused_while_the_group_has_active_members(
        ops: Client, admin: ClusterClient, kafka_bootstrap: str, protocol: str) -> None:
    """For groups of both protocols: a KIP-848 member takes the Empty group over with its
    offsets, as a classic member does."""
    topic, group = committed_group(admin, kafka_bootstrap, (4, 8))
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap,
                                         "group.id": group, "enable.auto.commit": False,
                                         "group.protocol": protocol})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert consumer.assignment()
        url = f"/groups/+reset/{group}/"
        dry = ops.post(url, {"mode": "to-earliest", "execute": "0"}).content.decode()
        assert "can only be reset if the group" in dry and "STABLE" in dry
        assert 'id="reset-execute"' not in dry
        refused = ops.post(url, {"mode": "to-earliest", "execute": "1"})
        assert refused.status_code == 400
        assert "is inactive, but the current state is STABLE" in refused.content.decode()
        plan = ops.post(f"/api/v1/groups/{group}/reset-offsets", {"mode": "to-earliest"},
                        content_type="application/json").json()
        assert (plan["type"], plan["state"], plan["may_execute"]) == (protocol, "STABLE", False)
        api = ops.post(f"/api/v1/groups/{group}/reset-offsets",
                       {"mode": "to-earliest", "dry_run": False}, content_type="application/json")
        assert api.status_code == 409 and api.json()["error_code"] == "GROUP_NOT_EMPTY"
        deleted = ops.post(f"/groups/+delete/{group}/", {"confirm": group}, follow=True)
        assert "NON_EMPTY_GROUP" in deleted.content.decode()
        assert committed(admin, group) == [4, 8]
        assert set(AuditEntry.objects.values_list("result", flat=True)) == {"error"}
    finally:
        consumer.close()


def test_a_group_is_deleted_with_its_offsets(ops: Client, admin: ClusterClient,
                                             kafka_bootstrap: str) -> None:
    _, group = committed_group(admin, kafka_bootstrap, (1, 1))
    assert ops.post(f"/groups/+delete/{group}/", {"confirm": "wrong"}).status_code == 302
    assert committed(admin, group) == [1, 1]
    response = ops.post(f"/groups/+delete/{group}/", {"confirm": group})
    assert response.status_code == 302 and response["Location"] == "/groups/"
    assert committed(admin, group) == []
    assert AuditEntry.objects.get().action == "group.delete"


def test_a_missing_topic_and_a_dead_cluster_are_form_messages(ops: Client, admin: ClusterClient,
                                                              kafka_bootstrap: str,
                                                              settings: SettingsWrapper) -> None:
    _, group = committed_group(admin, kafka_bootstrap, (1, 1))
    missing = ops.post(f"/groups/+reset/{group}/", {"mode": "to-earliest", "topic": "nope"})
    assert missing.status_code == 400 and "UNKNOWN_TOPIC_OR_PART" in missing.content.decode()
    settings.KAFKA_BOOTSTRAP_SERVERS = "127.0.0.1:1"
    dead = ops.post(f"/groups/+reset/{group}/", {"mode": "to-earliest"})
    assert dead.status_code == 400 and "The cluster did not answer" in dead.content.decode()


def test_the_dry_run_tells_seconds_from_the_groups_history(admin: ClusterClient,
                                                          kafka_bootstrap: str) -> None:
    topic, group = committed_group(admin, kafka_bootstrap, (10, 10))
    now = time.time()
    # The end offset of partition 0 went 0 -> 10 over the last 100 s: 10 s per message.
    for offset, age in ((0, 100), (10, 0.001)):
        PartitionLagHistory.objects.create(
            group_id=group, topic=topic, partition=0,
            ts=dt.datetime.fromtimestamp(now - age, dt.UTC), committed_offset=10,
            end_offset=offset, lag=0, status=BurrowStatus.OK)
    plan = actions.preview_group_offsets_reset(
        group, ResetSpec(ResetMode.TO_OFFSET, topic=topic, offset=5))
    first, second = plan.partitions
    assert first.seconds_before == 0.0 and first.seconds_after == pytest.approx(50, abs=2)
    assert second.seconds_after is None  # no history for partition 1: unknown, not guessed
