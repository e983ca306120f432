"""The Schemas pages: subjects (search, server-side pagination), one subject's versions with
a side-by-side diff (Avro and JSON Schema as pretty-printed JSON, Protobuf as .proto text,
highlighted), compatibility levels (global and per subject), and registering a new version
of any of the three formats, with references, after a compatibility test.

Reads go to the registry app's own lookups in-process (the same database, no HTTP); every
change goes through `controlcenter.actions`, which calls `registry.actions`, so the audit
log and permissions apply and registry refusals come back as form messages with Confluent's
error_code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from controlcenter import actions, highlight, schemadiff
from controlcenter.access import Capability, requires
from registry import lookups
from registry.compatibility import Level
from registry.formats import AVRO, JSON, PROTOBUF
from registry.models import GLOBAL, Config, SubjectVersion

PER_PAGE = 50
LEVELS = [(level.value, level.value) for level in Level]
SCHEMA_TYPES = [(AVRO, "Avro"), (JSON, "JSON Schema"), (PROTOBUF, "Protobuf")]
TYPE_LABELS = dict(SCHEMA_TYPES)


@dataclass(frozen=True)
class SubjectRow:
    name: str
    versions: int
    latest: int
    compatibility: str  # the subject's own level, or "" when the global one applies
    schema_type: str = AVRO  # its latest version's

    @property
    def type_label(self) -> str:
        return TYPE_LABELS.get(self.schema_type, self.schema_type)


def subject_rows(query: str = "") -> list[SubjectRow]:
    """Subjects with live versions whose name contains `query`, by name."""
    rows = SubjectVersion.objects.filter(deleted=False)
    if query:
        rows = rows.filter(subject__name__icontains=query)
    counted = (rows.values("subject__name").annotate(versions=Count("id"), latest=Max("version"))
               .order_by("subject__name"))
    own = dict(Config.objects.exclude(subject=GLOBAL).filter(compatibility__isnull=False)
               .values_list("subject", "compatibility"))
    return [SubjectRow(r["subject__name"], r["versions"], r["latest"],
                       own.get(r["subject__name"]) or "") for r in counted]


def with_types(rows: list[SubjectRow]) -> list[SubjectRow]:
    """`rows` with the schema type of each one's latest version (one query for a page)."""
    latest = {(r.name, r.latest) for r in rows}
    types = {(name, version): schema_type for name, version, schema_type in
             SubjectVersion.objects.filter(subject__name__in=[r.name for r in rows])
             .values_list("subject__name", "version", "schema__schema_type")
             if (name, version) in latest}
    return [SubjectRow(r.name, r.versions, r.latest, r.compatibility,
                       types.get((r.name, r.latest), AVRO)) for r in rows]


class CompatibilityForm(forms.Form):
    compatibility = forms.ChoiceField(choices=LEVELS, label="Compatibility level")


PLACEHOLDERS = {
    AVRO: '{"type": "record", "name": ...}',
    JSON: '{"type": "object", "properties": {...}}',
    PROTOBUF: 'syntax = "proto3";\nmessage Order { ... }',
}


class SchemaForm(forms.Form):
    schema_type = forms.ChoiceField(
        choices=SCHEMA_TYPES, initial=AVRO, label="Format", required=False,  # absent: Avro
        widget=forms.Select(attrs={"data-placeholders": json.dumps(PLACEHOLDERS)}))
    schema = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false",
                                     "placeholder": PLACEHOLDERS[AVRO]}),
        help_text="Avro or JSON Schema JSON, or .proto text. Test it against the subject's "
                  "compatibility level, then register it as the next version.")
    references = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text='Optional, as Confluent\'s API takes them: [{"name": "other.proto", '
                  '"subject": "other", "version": 1}].')

    def __init__(self, *args: Any, schema_type: str = AVRO, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["schema_type"].initial = schema_type
        self.fields["schema"].widget.attrs["placeholder"] = PLACEHOLDERS.get(
            schema_type, PLACEHOLDERS[AVRO])

    def clean_references(self) -> list[dict[str, Any]]:
        text = self.cleaned_data["references"].strip()
        if not text:
            return []
        try:
            found = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from exc
        if not isinstance(found, list) or not all(isinstance(r, dict) for r in found):
            raise forms.ValidationError("A JSON list of {name, subject, version} objects.")
        return found

    def request(self) -> actions.SchemaText:
        data = self.cleaned_data
        return actions.SchemaText(data["schema"], data["schema_type"] or AVRO,
                                  data["references"])


@require_GET
def schemas(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    page = Paginator(subject_rows(query), PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = with_types(list(page.object_list))
    level = lookups.compatibility_level(None).value
    return render(request, "controlcenter/schemas.html", {
        "page": page, "q": query, "global_level": level,
        "global_form": CompatibilityForm(initial={"compatibility": level})})


def subject_context(subject: str, request: HttpRequest) -> Mapping[str, Any] | None:
    """Versions, the one shown, the diff between two, the levels; None without versions."""
    versions = lookups.subject_versions(subject)
    if not versions:
        return None
    by_number = {v.version: v for v in versions}
    shown = by_number.get(_number(request.GET.get("version")), versions[-1])
    new = by_number.get(_number(request.GET.get("to")), versions[-1])
    old_default = versions[-2] if len(versions) > 1 else versions[-1]
    old = by_number.get(_number(request.GET.get("from")), old_default)
    rows = schemadiff.side_by_side(old.schema.text, new.schema.text, old.schema.schema_type,
                                   new.schema.schema_type)
    own = Config.objects.filter(subject=subject, compatibility__isnull=False).first()
    level = lookups.compatibility_level(subject).value
    shown_type = shown.schema.schema_type
    return {
        "subject": subject, "versions": versions, "shown": shown,
        "shown_text": schemadiff.pretty(shown.schema.text, shown_type),
        "shown_html": highlight.block(schemadiff.pretty(shown.schema.text, shown_type),
                                      shown_type),
        "shown_type": TYPE_LABELS.get(shown_type, shown_type),
        "latest_type": versions[-1].schema.schema_type,
        "subject_type": TYPE_LABELS.get(versions[-1].schema.schema_type, ""),
        "type_labels": TYPE_LABELS,
        "old": old, "new": new, "diff": rows, "changed": schemadiff.changed_lines(rows),
        "level": level, "own_level": own.compatibility if own else "",
        "global_level": lookups.compatibility_level(None).value,
        "compat_form": CompatibilityForm(initial={"compatibility": level}),
    }


def _number(text: str | None) -> int:
    """A version number from the query; 0 (no version) when absent or not a number."""
    try:
        return int(text) if text else 0
    except ValueError:
        return 0


def _subject_page(request: HttpRequest, subject: str, form: SchemaForm | None = None,
                  problems: list[str] | None = None, status: int = 200) -> HttpResponse:
    context = subject_context(subject, request)
    if context is None:
        return render(request, "controlcenter/subject_new.html", {
            "subject": subject, "form": form or SchemaForm(), "problems": problems,
            "global_level": lookups.compatibility_level(None).value},
            status=status if form is not None else 404)
    form = form or SchemaForm(schema_type=context["latest_type"])
    return render(request, "controlcenter/subject.html", {
        **context, "form": form, "problems": problems}, status=status)


@require_GET
def subject(request: HttpRequest, subject: str) -> HttpResponse:
    return _subject_page(request, subject)


def subject_register(request: HttpRequest, subject: str) -> HttpResponse:
    """POST "test": the compatibility test, for anyone who may view (it changes nothing);
    POST "register": test, then register, for users who may change schemas."""
    if request.method == "POST" and request.POST.get("action") == "test":
        form = SchemaForm(request.POST)
        if not form.is_valid():
            return _subject_page(request, subject, form, status=400)
        try:
            problems = actions.check_schema_compatibility(subject, form.request())
        except actions.ActionError as exc:
            form.add_error("schema", str(exc))
            return _subject_page(request, subject, form, status=400)
        return _subject_page(request, subject, form, problems)
    return _register(request, subject)


@requires(Capability.CHANGE_SCHEMAS)
def _register(request: HttpRequest, subject: str) -> HttpResponse:
    form = SchemaForm(request.POST)
    if not form.is_valid():
        return _subject_page(request, subject, form, status=400)
    try:
        registered = actions.register_schema_version(request, subject, form.request())
    except actions.ActionError as exc:
        form.add_error("schema", str(exc))
        return _subject_page(request, subject, form, status=400)
    messages.success(request, f"{subject}: registered as version {registered.version} "
                              f"(schema id {registered.schema_id}).")
    return redirect("subject", subject=subject)


@requires(Capability.CHANGE_SCHEMAS)
def subject_compatibility(request: HttpRequest, subject: str) -> HttpResponse:
    """Set the subject's own level, or (`clear`) fall back to the global one."""
    try:
        if request.POST.get("clear"):
            previous = actions.clear_schema_compatibility(request, subject)
            messages.success(request, f"{subject}: its own level ({previous}) removed; the "
                                      "global level applies.")
        else:
            _set_level(request, subject)
    except actions.ActionError as exc:
        messages.error(request, f"{subject}: {exc}")
    return redirect("subject", subject=subject)


@requires(Capability.CHANGE_SCHEMAS)
def global_compatibility(request: HttpRequest) -> HttpResponse:
    try:
        _set_level(request, None)
    except actions.ActionError as exc:
        messages.error(request, f"Global compatibility: {exc}")
    return redirect("schemas")


def _set_level(request: HttpRequest, subject: str | None) -> None:
    form = CompatibilityForm(request.POST)
    if not form.is_valid():
        raise actions.ActionError(form.errors.as_text())
    level = form.cleaned_data["compatibility"]
    actions.set_schema_compatibility(request, subject, level)
    messages.success(request, f"{subject or 'Global'} compatibility set to {level}.")
