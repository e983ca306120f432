"""/api/v1/ routes of the control center's JSON API. Ids and subjects may hold `/`, so
they are `path` segments placed last, after the routes with a fixed suffix."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.urls import path

from controlcenter.api import analysis, cluster, groups, schedules, schemas, streams


def _view(cls: Any) -> Any:
    # The API answers for itself (401/403 JSON); the page login redirect is not for it.
    return login_not_required(cls.as_view())


urlpatterns = [
    path("analysis", _view(analysis.AnalysisListView), name="api-analysis"),
    path("analysis/<int:run_id>", _view(analysis.AnalysisView), name="api-analysis-run"),
    path("analysis/<int:run_id>/cancel", _view(analysis.AnalysisCancelView),
         name="api-analysis-cancel"),
    path("analysis/<int:run_id>/results", _view(analysis.AnalysisResultsView),
         name="api-analysis-results"),
    path("analysis/schedules", _view(schedules.ScheduleListView), name="api-schedules"),
    path("analysis/schedules/<int:schedule_id>", _view(schedules.ScheduleView),
         name="api-schedule"),
    path("analysis/schedules/<int:schedule_id>/enable", _view(schedules.ScheduleEnableView),
         name="api-schedule-enable"),
    path("analysis/schedules/<int:schedule_id>/disable",
         _view(schedules.ScheduleDisableView), name="api-schedule-disable"),
    *cluster.urlpatterns,
    path("groups", _view(groups.GroupListView), name="api-groups"),
    path("groups/<path:group_id>/history", _view(groups.GroupHistoryView),
         name="api-group-history"),
    path("groups/<path:group_id>/reset-offsets", _view(groups.GroupResetView),
         name="api-group-reset"),
    path("groups/<path:group_id>", _view(groups.GroupView), name="api-group"),
    path("schemas/subjects", _view(schemas.SubjectListView), name="api-subjects"),
    path("schemas/compatibility", _view(schemas.CompatibilityView),
         name="api-global-compatibility"),
    path("schemas/subjects/<path:subject>/compatibility", _view(schemas.CompatibilityView),
         name="api-subject-compatibility"),
    path("schemas/subjects/<path:subject>/compatibility-check",
         _view(schemas.CompatibilityCheckView), name="api-subject-compatibility-check"),
    path("schemas/subjects/<path:subject>/diff", _view(schemas.DiffView),
         name="api-subject-diff"),
    path("schemas/subjects/<path:subject>", _view(schemas.SubjectView), name="api-subject"),
    *streams.urlpatterns_for(_view),
]
