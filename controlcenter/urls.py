from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from .pages import audit, auth, health, overview

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("healthz", health.healthz, name="healthz"),
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("audit/", audit.audit_log, name="audit-log"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="openapi-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="openapi-schema"), name="swagger"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="openapi-schema"), name="redoc"),
    path(settings.REGISTRY_PREFIX, include("registry.urls")),
    path(settings.RESTPROXY_PREFIX, include("restproxy.urls")),
]
