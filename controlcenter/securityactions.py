"""The state changes of the Security pages: a secured cluster's SCRAM users and ACLs, and
a user's API token.

The same contract as actions.py (which would pass 500 lines with these): verb-first
functions that change the cluster through clusterclient, write the audit log (never a
password: only the user, the mechanism and the iterations), then tell open pages. A
refusal raises `actions.ActionError` in the broker's words (SECURITY_DISABLED on a cluster
without an authorizer, UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND, ...).
"""

from __future__ import annotations

from dataclasses import asdict

from django.contrib.auth.models import User

from clusterclient import security
from clusterclient.security import AclEntry, AclFilter
from controlcenter import apitokens, connection
from controlcenter.actions import _notify, _system_words
from controlcenter.audit import Actor, audited


def create_acl(actor: Actor, entry: AclEntry) -> None:
    """Create one ACL binding; every broker applies it from the metadata log."""
    with audited(actor, "acl.create", _target(entry), asdict(entry)) as note, _system_words():
        security.create_acl(connection.cluster(), entry)
        note.message = "created"
    _notify([("security", None)], f"ACL for {entry.principal} created.")


def delete_acl(actor: Actor, entry: AclEntry) -> int:
    """Delete exactly this binding (every field matched literally); how many went."""
    exact = AclFilter(entry.principal, entry.resource_type, entry.resource_name,
                      entry.pattern_type, entry.operation, entry.permission, entry.host)
    with audited(actor, "acl.delete", _target(entry), asdict(entry)) as note, _system_words():
        deleted = security.delete_acls(connection.cluster(), exact)
        note.message = f"deleted {len(deleted)}"
    _notify([("security", None)], f"ACL for {entry.principal} deleted.")
    return len(deleted)


def upsert_scram_user(actor: Actor, user: str, mechanism: str, password: str,
                      iterations: int) -> None:
    """Create a SCRAM user, or set a new password for one of its mechanisms."""
    parameters = {"mechanism": mechanism, "iterations": iterations}
    with audited(actor, "scram.upsert", f"scram-user {user}", parameters) as note, _system_words():
        security.upsert_scram_credential(connection.cluster(), user, mechanism, password,
                                         iterations)
        note.message = "credential set"
    _notify([("security", None)], f"SCRAM user {user} ({mechanism}) set.")


def delete_scram_credential(actor: Actor, user: str, mechanism: str) -> None:
    """Remove one of a user's SCRAM credentials; its next login or re-authentication with
    that mechanism fails."""
    with audited(actor, "scram.delete", f"scram-user {user}", {"mechanism": mechanism}) as note, \
            _system_words():
        security.delete_scram_credential(connection.cluster(), user, mechanism)
        note.message = "credential deleted"
    _notify([("security", None)], f"SCRAM user {user} ({mechanism}) deleted.")


def _target(entry: AclEntry) -> str:
    """E.g. "acl TOPIC PREFIXED orders-": never "topic <name>", which the audit log would
    link to a topic page."""
    return f"acl {entry.resource_type} {entry.pattern_type} {entry.resource_name}"


def create_api_token(actor: Actor, user: User) -> str:
    """A new API token for `user` (replacing any old one); the key, to show once. The audit
    log names the user, never the key."""
    with audited(actor, "api_token.create", f"user {user.get_username()}") as note:
        key = apitokens.replace_token(user)
        note.message = "created (any previous token revoked)"
    return key
