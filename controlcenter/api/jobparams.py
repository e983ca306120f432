"""The jobs' own parameters as OpenAPI fields, read from their launch forms (`analysis.jobs`),
so the documents of launches and schedules list every parameter a form takes, with its
bounds, its default and the jobs that use it."""

from __future__ import annotations

from typing import Any

from django import forms
from rest_framework import serializers

from controlcenter.analysis.jobs import JOBS, NameListField


def job_parameter_fields() -> dict[str, serializers.Field[Any, Any, Any, Any]]:
    """One optional field per job parameter, with the jobs that take it in its help."""
    found: dict[str, tuple[forms.Field, list[str]]] = {}
    for spec in JOBS.values():
        form = spec.form()
        for name in form.job_fields():
            found.setdefault(name, (form.fields[name], []))[1].append(spec.name)
    return {name: _field(field, jobs) for name, (field, jobs) in found.items()}


def _field(field: forms.Field, jobs: list[str]) -> serializers.Field[Any, Any, Any, Any]:
    words = ": ".join(str(w).rstrip(".") for w in (field.label, field.help_text) if w)
    options: dict[str, Any] = {"help_text": f"{words}. Jobs: {', '.join(jobs)}."}
    if isinstance(field, NameListField):
        return serializers.ListField(child=serializers.CharField(), required=False, **options)
    options.update({k: v for k in ("min_value", "max_value")
                    if (v := getattr(field, k, None)) is not None})
    if field.initial is not None:
        options["default"] = field.initial
    else:
        options["required"] = False
    kind = serializers.FloatField if isinstance(field, forms.FloatField) else \
        serializers.IntegerField
    return kind(**options)
