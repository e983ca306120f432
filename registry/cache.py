"""The reader cache: what `/schemas/ids/{id}` returns, kept in each process.

A schema's content never changes under its id (ids are never reused), but an id stops
being served when the last subject version using it is permanently deleted. Every entry is
therefore stamped with a *generation*: a random token kept in Django's shared cache
(Redis, or files on one machine). A permanent delete, once committed, writes a new token;
each lookup reads the token (one shared-cache get, no database query) and drops the
process's entries when it has changed.

This is correct across processes without locks: an entry loaded from the database before
a delete committed is stored under the old token, and every lookup after the new token is
written ignores it. Misses are never cached, so a newly registered id is visible at once.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from django.core.cache import cache as shared_cache

GENERATION_KEY = "millrace:registry:generation"
MAX_ENTRIES = 10_000


class SchemaCache:
    def __init__(self) -> None:
        self._entries: dict[int, Any] = {}
        self._generation: str | None = None
        self._lock = threading.Lock()

    def get(self, schema_id: int, load: Callable[[int], Any | None]) -> Any | None:
        generation = self._current_generation()
        with self._lock:
            if generation != self._generation:
                self._entries.clear()
                self._generation = generation
            if schema_id in self._entries:
                return self._entries[schema_id]
        value = load(schema_id)
        if value is not None:
            with self._lock:
                if self._generation == generation:
                    if len(self._entries) >= MAX_ENTRIES:
                        self._entries.clear()
                    self._entries[schema_id] = value
        return value

    def invalidate(self) -> None:
        """Start a new generation in every process; call after the delete commits."""
        shared_cache.set(GENERATION_KEY, uuid.uuid4().hex, timeout=None)
        with self._lock:
            self._entries.clear()
            self._generation = None

    @staticmethod
    def _current_generation() -> str:
        generation = shared_cache.get(GENERATION_KEY)
        if generation is None:
            # Missing or evicted: start one. `add` lets concurrent starters agree on one.
            shared_cache.add(GENERATION_KEY, uuid.uuid4().hex, timeout=None)
            generation = shared_cache.get(GENERATION_KEY)
        return str(generation)


schemas_by_id = SchemaCache()
