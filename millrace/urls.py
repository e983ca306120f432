"""The project's URLconf on the web port: the control center at the root, the admin, the
OpenAPI pages, and the registry and the REST proxy under their prefixes. On their own ports
the two APIs are served with their root URLconfs instead (ports.py)."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

from . import openapi

urlpatterns = [
    path("", include("controlcenter.urls")),
    path("admin/", admin.site.urls),
    # One maintained OpenAPI document for the registry and the REST proxy (openapi.py).
    path("api/schema/", openapi.schema_view, name="openapi-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="openapi-schema"), name="swagger"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="openapi-schema"), name="redoc"),
    path(settings.REGISTRY_PREFIX, include("registry.urls")),
    path(settings.RESTPROXY_PREFIX, include("restproxy.urls")),
]
