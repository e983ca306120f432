"""What an analysis schedule holds, and the one form that checks it (page and API).

A schedule is "this job every N minutes over the last M" (`AnalysisSchedule`, read by one
Celery beat entry). Its values are checked by the job's own launch form (`jobs.py`: known
groups and topics, possible thresholds and factors, a window of at least a minute) plus the
schedule's name and interval, so a schedule can never hold what a click could not launch.
It has no `until`: each launch's window ends when it launches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from django import forms

from controlcenter.analysis.jobs import JobForm, JobSpec
from controlcenter.models import AnalysisSchedule

MAX_EVERY_MINUTES = 7 * 24 * 60
WINDOW_KEYS = ("since", "until")  # computed at each launch, never stored


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule's values, validated: what `actions` writes to an `AnalysisSchedule`."""

    name: str
    job: str
    params: dict[str, Any]  # the job's params without since/until
    window_minutes: int
    every_minutes: int
    # its cluster; "": the current one for a new schedule, its own for a changed one
    cluster: str = ""

    @classmethod
    def of(cls, name: str, job: str, form: JobForm, every_minutes: int,
           cluster: str = "") -> ScheduleSpec:
        """From a valid launch form of `job` (checked on `cluster`)."""
        params = {k: v for k, v in form.params().items() if k not in WINDOW_KEYS}
        return cls(name, job, params, form.cleaned_data["window_minutes"], every_minutes,
                   cluster)


class ScheduleFields(forms.Form):
    """The schedule's own fields, added to a job's form by `schedule_form`."""

    name = forms.SlugField(max_length=100, help_text="Letters, digits, - and _.")
    every_minutes = forms.IntegerField(min_value=1, max_value=MAX_EVERY_MINUTES,
                                       label="Every (minutes)")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.data.get("until") not in (None, ""):
            raise forms.ValidationError(
                "A schedule has no 'until': each launch's window ends when it launches.")
        return data


def schedule_form(spec: JobSpec, data: Mapping[str, Any]) -> JobForm:
    """The form over `data` (omitted fields at the launch form's initial values): the job's
    form without `until`, plus `name` and `every_minutes`."""
    form_class = type(f"{spec.form.__name__}Schedule", (spec.form, ScheduleFields), {
        "until": None,  # removes the field (Django's way); ScheduleFields refuses it
        "NOT_JOB_FIELDS": (*JobForm.NOT_JOB_FIELDS, *ScheduleFields.base_fields),
    })
    return cast(type[JobForm], form_class).with_defaults(data)


def spec_of(form: JobForm, job: str, cluster: str = "") -> ScheduleSpec:
    """The spec of a valid `schedule_form` (checked on `cluster`)."""
    data = form.cleaned_data
    return ScheduleSpec.of(data["name"], job, form, data["every_minutes"], cluster)


def current_values(schedule: AnalysisSchedule) -> dict[str, Any]:
    """What the schedule holds, as form data: what a partial update starts from."""
    return {**schedule.parameters, "name": schedule.name, "job": schedule.job,
            "window_minutes": schedule.window_minutes, "every_minutes": schedule.every_minutes}
