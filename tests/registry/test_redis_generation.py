"""The reader cache's generation with Redis as the shared cache (registry/cache.py): two
registry processes and a real Redis, their keys and channel under a prefix of this
module's own. A change made through one process reaches the other's reads within the
documented window, without a Redis read per request while the listeners are subscribed,
and at once through the token while they are not."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from registry.cache import LIVENESS

from .live import registry_servers

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PREFIX = f"test-generation-{uuid.uuid4().hex[:12]}"
TOKEN_KEY = f"{PREFIX}:1:millrace:registry:generation"
CHANNEL = TOKEN_KEY + ":changed"


@pytest.fixture(scope="module")
def shared() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError:
        pytest.fail(f"Redis is not running at {REDIS_URL}")
    yield client
    for key in client.scan_iter(f"{PREFIX}:*"):
        client.delete(key)
    client.close()


@pytest.fixture(scope="module")
def two(shared: redis.Redis, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    data_dir: Path = tmp_path_factory.mktemp("registry-redis")
    env = {"REDIS_URL": REDIS_URL, "MILLRACE_CACHE_PREFIX": PREFIX}
    with registry_servers(f"sqlite:///{data_dir / 'db.sqlite3'}", data_dir, processes=2,
                          extra_env=env) as urls:
        yield urls


def listeners(shared: redis.Redis) -> int:
    counts: list[tuple[bytes, int]] = shared.pubsub_numsub(CHANNEL)  # type: ignore[assignment]
    return int(dict(counts)[CHANNEL.encode()])


def wait_for_listeners(shared: redis.Redis, urls: list[str]) -> None:
    """Each process starts its listener on its first read."""
    deadline = time.monotonic() + 20
    while listeners(shared) < len(urls):
        assert time.monotonic() < deadline, "the registry processes did not subscribe"
        for url in urls:
            httpx.get(f"{url}/subjects/none/versions")
        time.sleep(0.1)
    time.sleep(2 * LIVENESS)  # long enough for a ping's answer to vouch for what they heard


def register(url: str, subject: str, name: str) -> int:
    """A version of `subject` (each name a new one; the schemas share a name, so that
    they are compatible)."""
    schema = {"type": "record", "name": "R",
              "fields": [{"name": name, "type": "int", "default": 0}]}
    answer = httpx.post(f"{url}/subjects/{subject}/versions", json={"schema": json.dumps(schema)})
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


def versions(url: str, subject: str) -> object:
    return httpx.get(f"{url}/subjects/{subject}/versions").json()


def cached_by_both(two: list[str], shared: redis.Redis) -> str:
    """A new subject with one version, registered through the first process and read
    through the second, once both listeners are subscribed."""
    one, other = two
    subject = f"gen-{uuid.uuid4().hex[:8]}"
    register(one, subject, "A")
    wait_for_listeners(shared, two)
    assert versions(other, subject) == [1]
    return subject


def stale_reads(url: str, subject: str, expected: object) -> int:
    """How many reads of `url` served something older than `expected` (within the
    window, which is well under a read's time here); fails past LIVENESS."""
    started, stale = time.monotonic(), 0
    while (got := versions(url, subject)) != expected:
        stale += 1
        assert time.monotonic() - started < LIVENESS, (got, expected)
    return stale


class RedisCommands:
    """The commands Redis runs on this module's keys (MONITOR), counted by name."""

    def __init__(self, shared: redis.Redis) -> None:
        self.counted: dict[str, int] = {}
        self._stop = f"{PREFIX}:stop-monitor"
        self._shared = shared
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._started = threading.Event()

    def __enter__(self) -> RedisCommands:
        self._thread.start()
        assert self._started.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._shared.get(self._stop)
        self._thread.join(10)

    def _watch(self) -> None:
        with self._shared.monitor() as monitor:  # type: ignore[no-untyped-call]
            self._started.set()
            for command in monitor.listen():
                text = command["command"]
                if self._stop in text:
                    return
                if PREFIX in text:
                    name = text.split()[0].upper()
                    self.counted[name] = self.counted.get(name, 0) + 1


def test_a_change_reaches_the_other_process_without_a_redis_read_per_request(
        two: list[str], shared: redis.Redis) -> None:
    one, other = two
    subject = cached_by_both(two, shared)
    with RedisCommands(shared) as redis_saw:
        for _ in range(20):
            assert versions(other, subject) == [1]
    # With the listeners vouching, reads ask Redis nothing (a starved listener's process
    # may fall back to the token for a moment: a few GETs, not one per read).
    assert redis_saw.counted.get("GET", 0) < 10, redis_saw.counted

    register(one, subject, "B")
    assert versions(one, subject) == [1, 2]  # in the acting process: at once
    stale = stale_reads(other, subject, [1, 2])
    assert httpx.delete(f"{one}/subjects/{subject}").json() == [1, 2]
    assert httpx.delete(f"{one}/subjects/{subject}?permanent=true").json() == [1, 2]
    stale += stale_reads(other, subject, {
        "error_code": 40401, "message": f"Subject '{subject}' not found."})
    print(f"reads of the other process that served a change late: {stale}")


def test_with_its_listener_cut_off_a_process_reads_the_token_on_every_request(
        two: list[str], shared: redis.Redis) -> None:
    one, other = two
    subject = cached_by_both(two, shared)
    clients: list[dict[str, str]] = shared.client_list()  # type: ignore[assignment]
    cut = [c["id"] for c in clients if c.get("name") == CHANNEL + ":listener"]
    assert len(cut) == 2
    for client_id in cut:
        shared.client_kill_filter(_id=client_id)
    # Nothing is published to the cut listeners now; the other process must not serve
    # its cached versions all the same.
    register(one, subject, "B")
    assert versions(other, subject) == [1, 2]
    deadline = time.monotonic() + 20
    while listeners(shared) < 2:  # and they come back by themselves
        assert time.monotonic() < deadline
        versions(other, subject)
        versions(one, subject)
        time.sleep(0.1)
