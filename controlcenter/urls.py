from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from .pages import audit, auth, brokers, health, messages, overview, topics

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
    path("topics/<str:name>/messages/tail", messages.topic_messages_tail, name="messages-tail"),
    path("topics/<str:name>/produce/", messages.produce, name="produce"),
    path("healthz", health.healthz, name="healthz"),
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("audit/", audit.audit_log, name="audit-log"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("controlcenter.api.cluster")),
    path("api/schema/", SpectacularAPIView.as_view(), name="openapi-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="openapi-schema"), name="swagger"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="openapi-schema"), name="redoc"),
    path(settings.REGISTRY_PREFIX, include("registry.urls")),
    path(settings.RESTPROXY_PREFIX, include("restproxy.urls")),
]
