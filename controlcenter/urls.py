from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("admin/", admin.site.urls),
    path(settings.REGISTRY_PREFIX, include("registry.urls")),
    path(settings.RESTPROXY_PREFIX, include("restproxy.urls")),
]
