"""The control center's routes: its pages and its JSON API (/api/v1/). The project's URLconf
(millrace/urls.py) mounts them at the root, beside the admin, the OpenAPI pages and the
registry's and the REST proxy's prefixes."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from .pages import (
    analytics,
    audit,
    auth,
    brokers,
    groups,
    health,
    messages,
    overview,
    schemas,
    topics,
)

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("brokers/", brokers.brokers, name="brokers"),
    path("brokers/elect-leaders/", brokers.elect_leaders, name="elect-leaders"),
    path("brokers/<int:node_id>/", brokers.broker, name="broker"),
    path("brokers/<int:node_id>/<str:command>/", brokers.broker_command, name="broker-command"),
    path("topics/", topics.topics, name="topics"),
    # "+" cannot occur in a topic name, so no topic hides the create page.
    path("topics/+create/", topics.topic_create, name="topic-create"),
    path("topics/<str:name>/", topics.topic, name="topic"),
    path("topics/<str:name>/delete/", topics.topic_delete, name="topic-delete"),
    path("topics/<str:name>/elect-leaders/", brokers.elect_leaders, name="topic-elect-leaders"),
    path("topics/<str:name>/config/", topics.topic_config, name="topic-config"),
    path("topics/<str:name>/messages/", messages.topic_messages, name="messages"),
    path("topics/<str:name>/produce/", messages.produce, name="produce"),
    # Group ids and subjects may hold "/": `path` segments, after the "+" action routes
    # (an id starting with "+reset/" would be shadowed; no Kafka tooling makes one).
    path("groups/", groups.groups, name="groups"),
    path("groups/+reset/<path:group_id>/", groups.group_reset, name="group-reset"),
    path("groups/+delete/<path:group_id>/", groups.group_delete, name="group-delete"),
    path("groups/<path:group_id>/", groups.group, name="group"),
    path("schemas/", schemas.schemas, name="schemas"),
    path("schemas/+compatibility/", schemas.global_compatibility, name="schemas-compatibility"),
    path("schemas/+compatibility/<path:subject>/", schemas.subject_compatibility,
         name="subject-compatibility"),
    path("schemas/+register/<path:subject>/", schemas.subject_register, name="subject-register"),
    path("schemas/<path:subject>/", schemas.subject, name="subject"),
    path("api/v1/schema/", SpectacularAPIView.as_view(
        patterns=[path("api/v1/", include("controlcenter.api.urls"))]), name="openapi-api-v1"),
    path("api/v1/", include("controlcenter.api.urls")),
    path("analytics/", analytics.analytics, name="analytics"),
    path("analytics/new/<str:job>/", analytics.analysis_new, name="analysis-new"),
    path("analytics/runs/<int:run_id>/", analytics.analysis_run, name="analysis-run"),
    path("analytics/runs/<int:run_id>/status", analytics.analysis_status,
         name="analysis-status"),
    path("analytics/runs/<int:run_id>/cancel/", analytics.analysis_cancel,
         name="analysis-cancel"),
    path("analytics/runs/<int:run_id>/download.<str:fmt>", analytics.analysis_download,
         name="analysis-download"),
    path("analytics/schedules/<int:schedule_id>/delete/", analytics.schedule_delete,
         name="analysis-schedule-delete"),
    path("analytics/schedules/<int:schedule_id>/enable/", analytics.schedule_enable,
         {"enabled": True}, name="analysis-schedule-enable"),
    path("analytics/schedules/<int:schedule_id>/disable/", analytics.schedule_enable,
         {"enabled": False}, name="analysis-schedule-disable"),
    path("healthz", health.healthz, name="healthz"),
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("audit/", audit.audit_log, name="audit-log"),
]
