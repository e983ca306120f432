"""The Security pages: a secured cluster's ACLs (list, filter, create with a preview of what
the binding allows, delete) and its SCRAM users (list, create or set a password, delete).

Both are read on demand through clusterclient (the collector does not sample them), bounded
by the control center's short timeout; a cluster without an authorizer (SECURITY_DISABLED)
or one that does not answer gives a note, never a 500. Anyone who may see pages may look;
only staff change (`access.requires_staff`), through `securityactions`, which audits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from clusterclient import ClusterClient, ClusterRequestError, ClusterUnavailable
from clusterclient import security as acls
from clusterclient.security import AclEntry, ScramUser
from controlcenter import actions, connection, securityactions
from controlcenter.access import is_staff, requires_staff
from controlcenter.models import GroupState, TopicState

# Kafka's legal topic names (Topic.validate); other resources take any non-empty name.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
CLUSTER_NAME = "kafka-cluster"
# The operations Kafka's kafka-acls accepts per resource type (AclEntry.supportedOperations).
SUPPORTED = {
    "TOPIC": {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS"},
    "GROUP": {"READ", "DESCRIBE", "DELETE"},
    "CLUSTER": {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"},
    "TRANSACTIONAL_ID": {"DESCRIBE", "WRITE"},
    "USER": {"CREATE_TOKENS", "DESCRIBE_TOKENS"},
}
# An ALLOW of these also allows DESCRIBE (DESCRIBE_CONFIGS for ALTER_CONFIGS), as Kafka's
# authorizer implies them.
IMPLIES = {"READ": "DESCRIBE", "WRITE": "DESCRIBE", "DELETE": "DESCRIBE", "ALTER": "DESCRIBE",
           "ALTER_CONFIGS": "DESCRIBE_CONFIGS"}
PRINCIPAL = re.compile(r"^User:\S.{0,254}$")
USERNAME = re.compile(r"^[^\s\x00-\x1f]{1,255}$")
PREVIEW_NAMES = 20
# What the pages say for Kafka's SECURITY_DISABLED (clusterclient.security detects it).
NO_AUTHORIZER = ("Authorization is not enabled on this cluster: no authorizer is configured "
                 "(authorizer.class.name is empty; its brokers answer ACL requests with "
                 "SECURITY_DISABLED), so ACLs are not enforced (every client may do "
                 "everything) and cannot be created. Start the platform with --secure, or "
                 "set authorizer.class.name on the brokers.")
T = TypeVar("T")


def _choices(names: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(n, n) for n in names]


class AclForm(forms.Form):
    principal = forms.CharField(max_length=260, initial="User:",
                                help_text="User:<name>, or User:* for every user.")
    permission = forms.ChoiceField(choices=_choices(acls.PERMISSIONS), initial="ALLOW")
    operation = forms.ChoiceField(choices=_choices(acls.OPERATIONS), initial="READ")
    resource_type = forms.ChoiceField(choices=_choices(acls.RESOURCE_TYPES), initial="TOPIC")
    pattern_type = forms.ChoiceField(
        choices=_choices(acls.PATTERN_TYPES), initial="LITERAL",
        help_text="LITERAL: this name (* for all); PREFIXED: every name starting with it.")
    resource_name = forms.CharField(max_length=255,
                                    help_text=f"A CLUSTER resource is named {CLUSTER_NAME}.")
    host = forms.CharField(max_length=255, initial="*", help_text="* for any host.")

    def clean_principal(self) -> str:
        principal = str(self.cleaned_data["principal"]).strip()
        if not PRINCIPAL.match(principal):
            raise forms.ValidationError(
                "A principal is User:<name> (User:* for every user); "
                f"{principal!r} is not one.")
        return principal

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind, name = data.get("resource_type"), str(data.get("resource_name", "")).strip()
        pattern, operation = data.get("pattern_type"), data.get("operation")
        if kind is None or pattern is None or operation is None or not name:
            return data
        problem = _resource_problem(kind, pattern, name)
        if problem:
            self.add_error("resource_name", problem)
        if operation != "ALL" and operation not in SUPPORTED[kind]:
            self.add_error("operation", f"{operation} does not apply to a {kind}; one of "
                                        f"ALL, {', '.join(sorted(SUPPORTED[kind]))}.")
        data["resource_name"] = name
        return data

    def entry(self) -> AclEntry:
        data = self.cleaned_data
        return AclEntry(data["principal"], data["host"].strip() or "*", data["operation"],
                        data["permission"], data["resource_type"], data["resource_name"],
                        data["pattern_type"])


def _resource_problem(kind: str, pattern: str, name: str) -> str:
    if name == "*" and pattern != "LITERAL":
        return "* (every resource) is a LITERAL name; a PREFIXED * would match nothing."
    if kind == "CLUSTER" and (name != CLUSTER_NAME or pattern != "LITERAL"):
        return f"The cluster resource is the LITERAL name {CLUSTER_NAME}."
    if kind == "TOPIC" and name != "*" and not TOPIC_NAME.match(name):
        return (f"{name!r} is not a topic name (up to 249 letters, digits, '.', '_' "
                "and '-').")
    return ""


@dataclass(frozen=True)
class AclPreview:
    """What a binding would do, in words, before it is created."""

    sentence: str
    implied: str
    matches: list[str]
    more: int
    known: bool  # whether existing objects can be listed for this resource type


def preview(entry: AclEntry) -> AclPreview:
    verb = "may" if entry.permission == "ALLOW" else "may not"
    who = "Every user" if entry.principal == "User:*" else entry.principal
    what = ("do anything" if entry.operation == "ALL" else entry.operation)
    where = "from any host" if entry.host == "*" else f"from host {entry.host}"
    kind = entry.resource_type.lower().replace("_", " ")
    if entry.resource_name == "*":
        target = f"every {kind}"
    elif entry.pattern_type == "PREFIXED":
        target = f"every {kind} whose name starts with “{entry.resource_name}”"
    else:
        target = f"the {kind} “{entry.resource_name}”"
    implied = ""
    if entry.permission == "ALLOW" and entry.operation in IMPLIES:
        implied = f"Allowing {entry.operation} also allows {IMPLIES[entry.operation]}."
    elif entry.permission == "DENY":
        implied = "A DENY wins over every ALLOW that matches the same request."
    names, known = _matching_names(entry)
    return AclPreview(f"{who} {verb} {what} on {target}, {where}.", implied,
                      names[:PREVIEW_NAMES], max(0, len(names) - PREVIEW_NAMES), known)


def _matching_names(entry: AclEntry) -> tuple[list[str], bool]:
    """The topics or groups the collector knows that the binding's pattern covers."""
    rows: list[str]
    if entry.resource_type == "TOPIC":
        rows = list(TopicState.objects.filter(internal=False).values_list("name", flat=True))
    elif entry.resource_type == "GROUP":
        rows = list(GroupState.objects.values_list("group_id", flat=True))
    else:
        return [], False
    name = entry.resource_name
    if name == "*":
        found = rows
    elif entry.pattern_type == "PREFIXED":
        found = [n for n in rows if n.startswith(name)]
    else:
        found = [n for n in rows if n == name]
    return sorted(found), True


def _read(call: Callable[[ClusterClient], T]) -> tuple[T | None, str]:
    try:
        return call(connection.cluster()), ""
    except ClusterRequestError as exc:
        if exc.code_name == "SECURITY_DISABLED":
            return None, NO_AUTHORIZER
        return None, f"{exc.code_name}: {exc.message}"
    except ClusterUnavailable as exc:
        return None, f"The cluster did not answer: {exc.message}"


# --- ACLs ----------------------------------------------------------------------------------


@require_GET
def acl_list(request: HttpRequest) -> HttpResponse:
    """Every binding, filtered by principal and resource (substrings, any case) and type."""
    principal = request.GET.get("principal", "").strip()
    resource = request.GET.get("resource", "").strip()
    kind = request.GET.get("type", "")
    entries, error = _read(acls.describe_acls)
    shown = [e for e in entries or []
             if principal.lower() in e.principal.lower()
             and resource.lower() in e.resource_name.lower()
             and (not kind or e.resource_type == kind)]
    return render(request, "controlcenter/security_acls.html", {
        "entries": shown, "total": len(entries or []), "error": error,
        # no authorizer: the note alone, with no table to fill nor Create to offer
        "disabled": error == NO_AUTHORIZER,
        "principal": principal, "resource": resource, "type": kind,
        "types": acls.RESOURCE_TYPES, "may_change": is_staff(request.user)})


def acl_create(request: HttpRequest) -> HttpResponse:
    """GET shows the form, and with `preview` what the binding would allow (to anyone who
    may view); POST creates it, for staff."""
    if request.method == "POST":
        return _create_acl(request)
    if _authorization_disabled():
        return render(request, "controlcenter/security_acl_create.html",
                      {"form": AclForm(), "preview": None, "disabled": NO_AUTHORIZER})
    form = AclForm(request.GET if "preview" in request.GET else None)
    shown = preview(form.entry()) if form.is_bound and form.is_valid() else None
    return render(request, "controlcenter/security_acl_create.html",
                  {"form": form, "preview": shown}, status=400 if form.errors else 200)


@requires_staff
def _create_acl(request: HttpRequest) -> HttpResponse:
    form = AclForm(request.POST)
    if form.is_valid():
        entry = form.entry()
        try:
            securityactions.create_acl(request, entry)
        except actions.ActionError as exc:
            if exc.code_name != "SECURITY_DISABLED":
                form.add_error(None, str(exc))
            else:  # the form message, and no form to try again with
                form.add_error(None, NO_AUTHORIZER)
                return render(request, "controlcenter/security_acl_create.html",
                              {"form": form, "preview": None, "disabled": NO_AUTHORIZER},
                              status=400)
        else:
            messages.success(request, f"ACL created: {preview(entry).sentence}")
            return redirect("acls")
    return render(request, "controlcenter/security_acl_create.html",
                  {"form": form, "preview": None}, status=400)


def _authorization_disabled() -> bool:
    """Whether the cluster runs no authorizer. One that does not answer is not taken for
    one without: its form is shown, and creating says what went wrong."""
    try:
        return not acls.authorizer_enabled(connection.cluster())
    except (ClusterRequestError, ClusterUnavailable):
        return False


class AclDeleteForm(AclForm):
    """A listed binding, sent back whole: it is deleted only if every field matches."""

    def clean(self) -> dict[str, Any]:  # an existing binding is deleted as it is
        return forms.Form.clean(self) or {}


@requires_staff
def acl_delete(request: HttpRequest) -> HttpResponse:
    form = AclDeleteForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not a binding: {form.errors.as_text()}")
        return redirect("acls")
    try:
        deleted = securityactions.delete_acl(request, form.entry())
    except actions.ActionError as exc:
        messages.error(request, f"Could not delete the ACL. {exc}")
    else:
        if deleted:
            messages.success(request, f"ACL deleted: {preview(form.entry()).sentence}")
        else:
            messages.warning(request, "No such ACL (deleted meanwhile?).")
    return redirect("acls")


# --- SCRAM users ---------------------------------------------------------------------------


class ScramForm(forms.Form):
    username = forms.CharField(max_length=255, help_text="The SASL user name (the principal "
                                                         "is User:<name>).")
    mechanism = forms.ChoiceField(choices=_choices(acls.MECHANISMS), initial="SCRAM-SHA-512")
    password = forms.CharField(max_length=1024, widget=forms.PasswordInput(),
                               strip=False)
    iterations = forms.IntegerField(
        min_value=acls.MIN_ITERATIONS, max_value=acls.MAX_ITERATIONS, initial=8192,
        help_text=f"Between {acls.MIN_ITERATIONS} and {acls.MAX_ITERATIONS}, as Kafka "
                  "accepts.")

    def clean_username(self) -> str:
        name = str(self.cleaned_data["username"])
        if not USERNAME.match(name):
            raise forms.ValidationError("A user name has no spaces or control characters.")
        return _not_a_service_principal(name)


class ScramDeleteForm(forms.Form):
    username = forms.CharField(max_length=255)
    mechanism = forms.ChoiceField(choices=_choices(acls.MECHANISMS))

    def clean_username(self) -> str:
        return _not_a_service_principal(str(self.cleaned_data["username"]))


def service_principals() -> set[str]:
    """The platform's own users (MILLRACE_SERVICE_PRINCIPALS, which `platform --secure`
    sets) and the control center's own login to the cluster."""
    own = settings.KAFKA_CLIENT_CONFIG.get("sasl.username")
    return {*settings.MILLRACE_SERVICE_PRINCIPALS, *([own] if own else [])}


def _not_a_service_principal(name: str) -> str:
    if name in service_principals():
        raise forms.ValidationError(
            f"{name} is one of the platform's own service principals: its services log in "
            "to the cluster (and to the Connect worker) with these credentials, so "
            "changing or deleting them here would lock them out. They are kept with the "
            "platform (its data dir's secure/credentials.json).")
    return name


def _messages(form: forms.Form) -> list[str]:
    return [str(m) for errors in form.errors.values() for m in errors]


@require_GET
def scram_users(request: HttpRequest) -> HttpResponse:
    return _users_page(request, ScramForm())


def _users_page(request: HttpRequest, form: ScramForm, status: int = 200) -> HttpResponse:
    users: list[ScramUser] | None
    users, error = _read(acls.describe_scram_users)
    return render(request, "controlcenter/security_users.html", {
        "users": users or [], "error": error, "form": form,
        "may_change": is_staff(request.user), "services": service_principals()},
        status=status)


@requires_staff
def scram_user_set(request: HttpRequest) -> HttpResponse:
    form = ScramForm(request.POST)
    if not form.is_valid():
        return _users_page(request, form, status=400)
    data = form.cleaned_data
    try:
        securityactions.upsert_scram_user(request, data["username"], data["mechanism"],
                                          data["password"], data["iterations"])
    except actions.ActionError as exc:
        form.add_error(None, str(exc))
        return _users_page(request, form, status=400)
    messages.success(request, f"{data['username']} can now log in with {data['mechanism']}.")
    return redirect("scram-users")


@requires_staff
def scram_user_delete(request: HttpRequest) -> HttpResponse:
    form = ScramDeleteForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not deleted: {' '.join(_messages(form))}")
        return redirect("scram-users")
    data = form.cleaned_data
    try:
        securityactions.delete_scram_credential(request, data["username"], data["mechanism"])
    except actions.ActionError as exc:
        messages.error(request, f"Could not delete it. {exc}")
    else:
        messages.success(request, f"{data['username']}'s {data['mechanism']} credential "
                                  "deleted.")
    return redirect("scram-users")
