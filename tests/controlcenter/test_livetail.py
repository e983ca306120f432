"""The live tail's shared reader (controlcenter/livetail.py) against a real broker: one
tail per topic for every browser following it, each browser's filters and start, and the
tail stops with the last browser. The browser side is in test_live_pages_browser.py."""

from __future__ import annotations

import json
import queue
import re
import time
from collections.abc import Callable

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from clusterclient.records import produce
from controlcenter import livetail
from controlcenter.livetail import Follower, TailHub
from controlcenter.messagebrowser import MessageQuery
from tests.brokerproc import BrokerProcess
from tests.controlcenter.test_messagebrowser import create


@pytest.fixture(autouse=True)
def _cluster(settings: SettingsWrapper, kafka_bootstrap: str) -> None:
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap


def values(pushes: queue.Queue[str], count: int) -> list[str]:
    """The values of the next `count` tailed rows (records with a key), in the order the
    page shows them."""
    shown: list[str] = []
    while len(shown) < count:
        message = json.loads(pushes.get(timeout=20))
        assert message["type"] == "fragment" and message["swap"] == "afterbegin", message
        assert message["id"] == "message-rows"
        # Each push goes on top of the table: its rows are newer than what is below.
        shown = re.findall(r"<pre>(.*?)</pre>", message["html"])[1::2] + shown
    return shown


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def leave_all(hub: TailHub, topic: str) -> None:
    """Every follower leaves: the tail's thread ends and the hub forgets the topic."""
    tail = hub.tails[("", topic)]
    for follower in list(tail.followers):
        hub.leave(topic, follower)
    tail.thread.join(timeout=20)
    assert not tail.thread.is_alive() and hub.tails == {}


def test_one_tail_serves_every_follower_with_its_filters_and_stops_with_the_last(
        kafka_bootstrap: str) -> None:
    topic = create(kafka_bootstrap)
    hub = TailHub()
    everything, tea = queue.Queue[str](), queue.Queue[str]()
    first = Follower(everything.put, MessageQuery(topic))
    second = Follower(tea.put, MessageQuery(topic, value="tea"))
    hub.join(topic, first)
    hub.join(topic, second)
    tail = hub.tails[("", topic)]
    assert list(hub.tails) == [("", topic)]
    wait_for(lambda: len(tail.followers) == 2)

    for item in ("green tea", "coffee", "black tea"):
        produce(kafka_bootstrap, topic, item.encode(), key=b"k")
    assert values(everything, 3) == ["black tea", "coffee", "green tea"]
    assert values(tea, 2) == ["black tea", "green tea"]

    # A browser whose page was read before the last record catches up from there; the
    # others, already past it, are not sent it again.
    late = queue.Queue[str]()
    hub.join(topic, Follower(late.put, MessageQuery(topic), {0: 2}))
    assert hub.tails[("", topic)] is tail
    assert values(late, 1) == ["black tea"]
    produce(kafka_bootstrap, topic, b"oolong tea", key=b"k")
    assert values(late, 1) == ["oolong tea"]
    assert values(everything, 1) == ["oolong tea"]
    assert values(tea, 1) == ["oolong tea"]

    leave_all(hub, topic)


def test_a_topic_that_does_not_exist_gets_a_banner_in_kafkas_words() -> None:
    hub = TailHub()
    pushes = queue.Queue[str]()
    hub.join("no-such-topic-here", Follower(pushes.put, MessageQuery("no-such-topic-here")))
    message = json.loads(pushes.get(timeout=20))
    assert message["type"] == "banner" and message["key"] == "tail"
    assert "UNKNOWN_TOPIC_OR_PART" in message["text"]
    wait_for(lambda: hub.tails == {})


def test_a_push_is_bounded_and_says_what_it_skipped(kafka_bootstrap: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(livetail, "MAX_ROWS", 3)
    topic = create(kafka_bootstrap)
    hub = TailHub()
    pushes = queue.Queue[str]()
    hub.join(topic, Follower(pushes.put, MessageQuery(topic), {0: 0}))
    for n in range(8):
        produce(kafka_bootstrap, topic, f"record {n}".encode())
    shown: list[str] = []
    skipped = 0
    while len(shown) + skipped < 8:
        html = json.loads(pushes.get(timeout=20))["html"]
        shown += re.findall(r"<pre>(record \d)</pre>", html)
        found = re.search(r"(\d+) older records? of this moment skipped", html)
        skipped += int(found.group(1)) if found else 0
    assert 0 < len(shown) < 8 and len(shown) + skipped == 8
    leave_all(hub, topic)


def test_the_tail_rides_out_a_broker_crash_and_restart(broker_factory: Callable[..., BrokerProcess],
                                             settings: SettingsWrapper) -> None:
    broker = broker_factory()
    settings.KAFKA_BOOTSTRAP_SERVERS = broker.bootstrap
    topic = create(broker.bootstrap)
    hub = TailHub()
    pushes = queue.Queue[str]()
    hub.join(topic, Follower(pushes.put, MessageQuery(topic)))
    tail = hub.tails[("", topic)]
    wait_for(lambda: len(tail.followers) == 1)
    produce(broker.bootstrap, topic, b"before", key=b"k")
    assert values(pushes, 1) == ["before"]

    broker.kill()
    time.sleep(2 * livetail.PERIOD)  # the tail polls a dead broker a few times
    broker.start()
    produce(broker.bootstrap, topic, b"after", key=b"k", timeout=30.0)
    assert values(pushes, 1) == ["after"]  # a banner would fail here: the tail went on
    assert tail.thread.is_alive()
    leave_all(hub, topic)
