"""The reader cache: what reads return, kept in each process, correct across processes.

Schemas by id, each subject's versions, and the configs and modes, all stamped with one
*generation*: a random token kept in Django's shared cache (Redis, or files on one
machine). Every read first reads the token (one shared-cache get, no database query) and
drops the process's entries when it has changed. Everything it holds changes only through
`actions`, and every action that changes something writes a new token: at once for its own
process, and again once its transaction has committed, for every process.

This is correct across processes without locks: an entry loaded from the database before
a change committed is stored under the old token, and every read after the new token is
written ignores it. Misses are cached too (a subject without versions, an unknown id):
whatever would create them writes a new token.

Under ASGI the registry first tries to answer a read on the event loop, from memory alone
(see `views.served`): inside `memory_only()`, a miss raises `NotInMemory` instead of
querying the database, and the view is run again on Django's sync thread, which loads and
fills the cache.

With Redis as the shared cache, a read does not ask Redis either: every action publishes
its new token on a channel, and a thread of each process (`GenerationListener`) bumps the
process's own generation when it hears one. The listener vouches for what it heard only
while its subscription answers: it pings through it every PING_INTERVAL, and a read uses
the bumped generation only if a ping sent less than LIVENESS ago has been answered (Redis
delivers every message published before a ping ahead of its answer). Otherwise, before the
first answer, while Redis is away or the thread is starved, a read reads the token as
before. So a reader in another process serves entries from before a committed action for
as long as the action's message takes to reach its listener (well under a millisecond on
one machine), and never longer than LIVENESS; in the acting process, not at all
(`invalidate` bumps it at once).
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, caches
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.redis import RedisCache

logger = logging.getLogger(__name__)
MAX_ENTRIES = 10_000
PING_INTERVAL = 0.2  # seconds between the listener's pings through its subscription
LIVENESS = 1.0  # the oldest answered ping a read trusts the listener's generation on
RECONNECT_INTERVAL = 1.0
_memory_only = contextvars.ContextVar("registry_memory_only", default=False)


class NotInMemory(Exception):
    """A read inside `memory_only()` needs the database."""


@contextmanager
def memory_only() -> Iterator[None]:
    token = _memory_only.set(True)
    try:
        yield
    finally:
        _memory_only.reset(token)


def trying_memory() -> bool:
    return _memory_only.get()


def need_database() -> None:
    """Call before any database work that a memory-only attempt must not start."""
    if _memory_only.get():
        raise NotInMemory


class GenerationListener:
    """A thread subscribed to the generation channel, counting the tokens it hears.

    `generation()` is the count while a ping sent less than LIVENESS ago has been answered
    through the subscription, else None. Every (re)subscription counts as a change too:
    what was published while the listener was not subscribed was not heard.
    """

    def __init__(self, location: str, channel: str) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        # No retries: a reconnection that resubscribed behind our back would hide a gap.
        self._redis = redis.Redis.from_url(
            location, retry=Retry(NoBackoff(), 0), socket_timeout=LIVENESS,
            client_name="".join(channel.split()) + ":listener")  # tests find it by name
        self.channel = channel
        self.heard = 0  # tokens heard and subscriptions made
        self._vouched_at = 0.0  # when the last answered ping was sent; 0: none yet
        self.pid = os.getpid()
        threading.Thread(target=self._run, name="registry-generation", daemon=True).start()

    def generation(self) -> int | None:
        if time.monotonic() - self._vouched_at > LIVENESS:
            return None
        return self.heard

    def _run(self) -> None:
        while True:
            try:
                self._listen()
            except Exception:  # Redis away, or its connection cut: read the token meanwhile
                logger.warning("registry generation listener lost Redis; reads ask it "
                               "until it is back", exc_info=True)
            self._vouched_at = 0.0
            time.sleep(RECONNECT_INTERVAL)

    def _listen(self) -> None:
        pubsub = self._redis.pubsub()  # type: ignore[no-untyped-call]
        try:
            pubsub.subscribe(self.channel)
            pings: list[float] = []  # when each unanswered ping was sent, oldest first
            pinged = 0.0
            while True:
                now = time.monotonic()
                if now - pinged >= PING_INTERVAL:
                    pings.append(now)
                    pinged = now
                    pubsub.ping()
                message = pubsub.get_message(timeout=PING_INTERVAL)
                if message is None:
                    continue
                if message["type"] in ("message", "subscribe"):
                    self.heard += 1
                elif message["type"] == "pong" and pings:
                    self._vouched_at = pings.pop(0)
        finally:
            self._vouched_at = 0.0
            pubsub.close()


class ReaderCache:
    def __init__(self, token_key: str) -> None:
        self.token_key = token_key
        self._entries: dict[Hashable, Any] = {}
        self._generation: str | None = None
        self._lock = threading.Lock()
        self._shared: BaseCache | None = None
        self._token_seen: tuple[tuple[int, ...] | None, str] = (None, "")
        self._listener: GenerationListener | None = None
        self._changed_here = 0  # invalidations of this process, part of a heard generation

    def get(self, key: Hashable, load: Callable[[], Any]) -> Any:
        generation = self._current_generation()
        with self._lock:
            if generation != self._generation:
                self._entries.clear()
                self._generation = generation
            if key in self._entries:
                return self._entries[key]
        need_database()
        value = load()
        with self._lock:
            if self._generation == generation:
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = value
        return value

    def invalidate(self) -> None:
        """Start a new generation in every process; call after the change commits."""
        tokens, token = self._tokens(), uuid.uuid4().hex
        tokens.set(self.token_key, token, timeout=None)
        if isinstance(tokens, RedisCache):
            client = tokens._cache.get_client(write=True)
            client.publish(self._channel(tokens), token)
        with self._lock:
            self._changed_here += 1
            self._entries.clear()
            self._generation = None

    def _current_generation(self) -> str:
        tokens = self._tokens()
        heard = self._heard(tokens)
        if heard is not None:
            return heard
        seen, (last_seen, last_generation) = self._token_file_state(tokens), self._token_seen
        if seen is not None and seen == last_seen:
            return last_generation
        generation = tokens.get(self.token_key)
        if generation is None:
            # Missing or evicted: start one. `add` lets concurrent starters agree on one.
            tokens.add(self.token_key, uuid.uuid4().hex, timeout=None)
            generation = tokens.get(self.token_key)
        self._token_seen = (seen, str(generation))
        return str(generation)

    def _heard(self, tokens: BaseCache) -> str | None:
        """With Redis, the generation its listener vouches for (see the module docstring)."""
        if not isinstance(tokens, RedisCache):
            return None
        listener = self._listener
        if listener is None or listener.pid != os.getpid():  # none yet, or a forked copy's
            with self._lock:
                if self._listener is listener:
                    location = tokens._servers[0]  # type: ignore[attr-defined]
                    self._listener = GenerationListener(location, self._channel(tokens))
            return None
        heard = listener.generation()
        return None if heard is None else f"heard:{id(listener)}:{heard}:{self._changed_here}"

    def _channel(self, tokens: BaseCache) -> str:
        return tokens.make_and_validate_key(self.token_key) + ":changed"

    def _token_file_state(self, tokens: BaseCache) -> tuple[int, ...] | None:
        """With the file cache, the token file's identity: FileBasedCache writes a value to
        a new file and renames it over the old one, so the token has not changed while this
        has not (read before the token, it can only make the next read a needless one).
        A stat is a small part of opening and unpickling the file on every read."""
        if not isinstance(tokens, FileBasedCache):
            return None
        try:
            found = os.stat(tokens._key_to_file(self.token_key))  # type: ignore[attr-defined]
        except OSError:
            return None
        return (found.st_ino, found.st_mtime_ns, found.st_ctime_ns, found.st_size)

    def _tokens(self) -> BaseCache:
        """The shared cache, one client for the process: `django.core.cache.cache` builds
        a new one for every request under ASGI (its connections are per async context).
        Both backends the platform uses (files, Redis) are safe to share between threads."""
        if self._shared is None:
            self._shared = caches.create_connection(DEFAULT_CACHE_ALIAS)
        return self._shared


reader_cache = ReaderCache("millrace:registry:generation")
