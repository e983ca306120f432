"""Writing the audit log: every state change records who asked for what, and the result.

Actions wrap their work in `audited` (or `aaudited` in async code):

    with audited(request, "topic.create", f"topic {name}", {"partitions": 3}) as note:
        admin.create_topic(...)
        note.message = "created with 3 partitions"

On success the entry says ok with `note.message`; if the block raises, the entry says
error with the exception's text and the exception propagates unchanged, so the caller still
shows its form error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest

from . import clusters
from .models import AuditEntry

Actor = HttpRequest | User | AnonymousUser | None


@dataclass
class AuditNote:
    """What the action tells the log about its outcome."""

    message: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)


def record(
    actor: Actor,
    action: str,
    target: str = "",
    parameters: dict[str, Any] | None = None,
    *,
    ok: bool,
    message: str = "",
    cluster: str | None = None,
) -> AuditEntry:
    """Write one entry. `actor` is the request (preferred: it also gives the address) or a
    user; None for the platform itself. `cluster`: the current one when not given."""
    user, remote_addr = _who(actor)
    return AuditEntry.objects.create(
        cluster=cluster or clusters.current_name(),
        user=user if user is not None and user.is_authenticated else None,
        username=_username(user),
        action=action,
        target=target,
        parameters=parameters or {},
        result=AuditEntry.Result.OK if ok else AuditEntry.Result.ERROR,
        message=message,
        remote_addr=remote_addr,
    )


arecord = sync_to_async(record)


@contextmanager
def audited(
    actor: Actor, action: str, target: str = "", parameters: dict[str, Any] | None = None,
    cluster: str | None = None,
) -> Iterator[AuditNote]:
    note = AuditNote(parameters=dict(parameters or {}))
    try:
        yield note
    except Exception as exc:
        record(actor, action, target, note.parameters, ok=False, message=_describe(exc),
               cluster=cluster)
        raise
    record(actor, action, target, note.parameters, ok=True, message=note.message,
           cluster=cluster)


@asynccontextmanager
async def aaudited(
    actor: Actor, action: str, target: str = "", parameters: dict[str, Any] | None = None
) -> AsyncIterator[AuditNote]:
    note = AuditNote(parameters=dict(parameters or {}))
    try:
        yield note
    except Exception as exc:
        await arecord(actor, action, target, note.parameters, ok=False, message=_describe(exc))
        raise
    await arecord(actor, action, target, note.parameters, ok=True, message=note.message)


def _who(actor: Actor) -> tuple[User | AnonymousUser | None, str | None]:
    if isinstance(actor, HttpRequest):
        return actor.user, actor.META.get("REMOTE_ADDR") or None
    return actor, None


def _username(user: User | AnonymousUser | None) -> str:
    if user is None:
        return "platform"
    if not user.is_authenticated:
        return "anonymous"
    return str(user.get_username())


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
