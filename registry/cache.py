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
"""

from __future__ import annotations

import contextvars
import os
import threading
import uuid
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, caches
from django.core.cache.backends.filebased import FileBasedCache

MAX_ENTRIES = 10_000
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


class ReaderCache:
    def __init__(self, token_key: str) -> None:
        self.token_key = token_key
        self._entries: dict[Hashable, Any] = {}
        self._generation: str | None = None
        self._lock = threading.Lock()
        self._shared: BaseCache | None = None
        self._token_seen: tuple[tuple[int, ...] | None, str] = (None, "")

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
        self._tokens().set(self.token_key, uuid.uuid4().hex, timeout=None)
        with self._lock:
            self._entries.clear()
            self._generation = None

    def _current_generation(self) -> str:
        tokens = self._tokens()
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
