"""The process's registry of consumer instances: create, find, delete, expire.

With RESTPROXY_INTERNAL_URL set, every instance is also recorded in the database with the
URL of its owning process (`ConsumerInstanceOwner`); `locate` then tells a view whether to
serve a request here or forward it to the owner, so no sticky load balancer is needed.

Owners found in the database are remembered (`OwnerCache`), so that a request for another
process's instance is forwarded from the event loop without a query on a thread. The
memory is stamped, like the registry's reader cache, with a generation token in Django's
shared cache: every process writes a new one after recording or forgetting an instance,
so no process forwards by a row that has changed.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, caches
from django.db import IntegrityError, close_old_connections

import httpauth
from restproxy import errors
from restproxy.api import need_thread
from restproxy.models import ConsumerInstanceOwner

from .instance import ConsumerInstance, InstanceConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Location:
    """Where an instance lives: here (`instance`) or at another process (`owner_url`)."""

    instance: ConsumerInstance | None = None
    owner_url: str | None = None


def internal_url() -> str:
    return settings.RESTPROXY_INTERNAL_URL.rstrip("/")


class OwnerCache:
    """Owner URLs of other processes' instances, valid while the shared generation holds."""

    TOKEN_KEY = "millrace:restproxy:owners"
    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._owners: dict[tuple[str, str], str] = {}
        self._generation: str | None = None
        self._lock = threading.Lock()
        self._shared: BaseCache | None = None

    def generation(self) -> str:
        """The current token (one shared-cache read); drops what an older one stamped."""
        tokens = self._tokens()
        found = tokens.get(self.TOKEN_KEY)
        if found is None:  # missing or evicted: `add` lets concurrent starters agree
            tokens.add(self.TOKEN_KEY, uuid.uuid4().hex, timeout=None)
            found = tokens.get(self.TOKEN_KEY)
        generation = str(found)
        with self._lock:
            if generation != self._generation:
                self._owners.clear()
                self._generation = generation
        return generation

    def get(self, key: tuple[str, str]) -> str | None:
        self.generation()
        with self._lock:
            return self._owners.get(key)

    def put(self, key: tuple[str, str], owner_url: str, generation: str) -> None:
        """Remember an owner read from the database under the token read before it."""
        with self._lock:
            if self._generation == generation:
                if len(self._owners) >= self.MAX_ENTRIES:
                    self._owners.clear()
                self._owners[key] = owner_url

    def invalidate(self) -> None:
        """A new generation for every process; call after an owner row changed."""
        self._tokens().set(self.TOKEN_KEY, uuid.uuid4().hex, timeout=None)
        with self._lock:
            self._owners.clear()
            self._generation = None

    def _tokens(self) -> BaseCache:
        # One client for the process (django.core.cache.cache makes one per async context).
        if self._shared is None:
            self._shared = caches.create_connection(DEFAULT_CACHE_ALIAS)
        return self._shared


class ConsumerManager:
    def __init__(self) -> None:
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._owners = OwnerCache()
        self._lock = threading.Lock()
        self._reaper: threading.Thread | None = None

    def create(self, group: str, name: str | None, config: InstanceConfig) -> ConsumerInstance:
        name = name or f"rest-consumer-{uuid.uuid4()}"
        key = (group, name)
        with self._lock:
            if key in self._instances:
                raise errors.consumer_already_exists(group, name)
            self._instances[key] = placeholder = _Reserved(group, name)  # type: ignore[assignment]
        try:
            self._record_owner(group, name, config)
            instance = ConsumerInstance(group, name, config)
        except BaseException:
            with self._lock:
                self._instances.pop(key, None)
            raise
        with self._lock:
            assert self._instances[key] is placeholder  # type: ignore[comparison-overlap]
            self._instances[key] = instance
        self._start_reaper()
        return instance

    def _record_owner(self, group: str, name: str, config: InstanceConfig) -> None:
        if not internal_url():
            return
        try:
            ConsumerInstanceOwner.objects.create(
                group=group, name=name, owner_url=internal_url(), format=config.format.value
            )
        except IntegrityError as exc:
            raise errors.consumer_already_exists(group, name) from exc
        finally:
            close_old_connections()
        self._owners.invalidate()

    def locate(self, group: str, name: str, forwarded: bool) -> Location:
        with self._lock:
            instance = self._instances.get((group, name))
        if isinstance(instance, ConsumerInstance):
            _check_user(instance)
            return Location(instance=instance)
        if not internal_url() or forwarded:
            raise errors.consumer_instance_not_found(group, name)
        owner_url = self._owners.get((group, name))
        if owner_url is None:
            need_thread()
            owner_url = self._stored_owner(group, name)
        return Location(owner_url=owner_url)

    def _stored_owner(self, group: str, name: str) -> str:
        generation = self._owners.generation()
        try:
            row = ConsumerInstanceOwner.objects.filter(group=group, name=name).first()
        finally:
            close_old_connections()
        if row is None or row.owner_url == internal_url():
            raise errors.consumer_instance_not_found(group, name)
        self._owners.put((group, name), row.owner_url, generation)
        return row.owner_url

    def delete(self, group: str, name: str) -> None:
        with self._lock:
            instance = self._instances.get((group, name))
            # another caller's instance is not found to this one, and stays
            if isinstance(instance, ConsumerInstance) and _is_callers(instance):
                del self._instances[(group, name)]
            else:
                instance = None
        if instance is None:
            raise errors.consumer_instance_not_found(group, name)
        self._forget(instance)

    def _forget(self, instance: ConsumerInstance) -> None:
        instance.stop()
        if internal_url():
            try:
                ConsumerInstanceOwner.objects.filter(
                    group=instance.group, name=instance.name, owner_url=internal_url()
                ).delete()
            finally:
                close_old_connections()
            self._owners.invalidate()

    def expire_idle(self, now: float | None = None) -> list[ConsumerInstance]:
        """Close instances idle for longer than consumer.instance.timeout.ms."""
        now = time.monotonic() if now is None else now
        limit = settings.RESTPROXY_CONSUMER_INSTANCE_TIMEOUT_MS / 1000
        with self._lock:
            expired = [
                i for i in self._instances.values()
                if isinstance(i, ConsumerInstance) and not i.busy and now - i.last_used > limit
            ]
            for instance in expired:
                del self._instances[(instance.group, instance.name)]
        for instance in expired:
            logger.info("consumer instance %s/%s expired", instance.group, instance.name)
            self._forget(instance)
        return expired

    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is not None:
                return
            self._reaper = threading.Thread(target=self._reap, daemon=True,
                                            name="restproxy-consumer-reaper")
        self._reaper.start()

    def _reap(self) -> None:
        while True:
            interval = settings.RESTPROXY_CONSUMER_INSTANCE_TIMEOUT_MS / 4000
            time.sleep(min(max(interval, 0.05), 5.0))
            try:
                self.expire_idle()
            except Exception:
                logger.exception("expiring consumer instances")

    def close_all(self) -> None:
        with self._lock:
            instances = [i for i in self._instances.values() if isinstance(i, ConsumerInstance)]
            self._instances.clear()
        for instance in instances:
            self._forget(instance)
        for instance in instances:
            instance.join()


class _Reserved:
    """Holds a name while its instance is being created (creation talks to the cluster)."""

    def __init__(self, group: str, name: str) -> None:
        self.group, self.name = group, name


_manager = ConsumerManager()


def manager() -> ConsumerManager:
    return _manager


def _is_callers(instance: ConsumerInstance) -> bool:
    """Whether the request's caller (HTTP auth) created the instance; True without auth."""
    principal = httpauth.current_principal.get()
    return principal is None or instance.user is None or principal.username == instance.user


def _check_user(instance: ConsumerInstance) -> None:
    """Another caller's instance is not found (each caller has instances of its own)."""
    if not _is_callers(instance):
        raise errors.consumer_instance_not_found(instance.group, instance.name)
