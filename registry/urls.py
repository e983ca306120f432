"""The Confluent Schema Registry API; mounted under REGISTRY_PREFIX and at the root of
REGISTRY_PORT. Subjects may contain `/` (sent as %2F): routes take the decoded path and
the views recover the subject from the raw path (see `params.raw_subject`)."""

from django.urls import URLPattern, URLResolver, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from . import views

S = r"(?P<subject>.+)"
V = r"(?P<version>[^/]+)"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.RootView.as_view()),
    path("subjects", views.SubjectListView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}/schema$", views.VersionSchemaView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}/referenced[bB]y$", views.ReferencedByView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}$", views.VersionView.as_view()),
    re_path(rf"^subjects/{S}/versions$", views.VersionListView.as_view()),
    re_path(rf"^subjects/{S}$", views.SubjectView.as_view()),
    path("schemas", views.SchemaListView.as_view()),
    path("schemas/types", views.SchemaTypesView.as_view()),
    path("schemas/ids/<int:schema_id>", views.SchemaByIdView.as_view()),
    path("schemas/ids/<int:schema_id>/schema", views.SchemaTextByIdView.as_view()),
    path("schemas/ids/<int:schema_id>/subjects", views.SchemaSubjectsView.as_view()),
    path("schemas/ids/<int:schema_id>/versions", views.SchemaVersionsView.as_view()),
    re_path(
        rf"^compatibility/subjects/{S}/versions/{V}$", views.CompatibilityVersionView.as_view()
    ),
    re_path(rf"^compatibility/subjects/{S}/versions$", views.CompatibilityView.as_view()),
    path("config", views.ConfigView.as_view()),
    re_path(rf"^config/{S}$", views.ConfigView.as_view()),
    path("mode", views.ModeView.as_view()),
    re_path(rf"^mode/{S}$", views.ModeView.as_view()),
    path("contexts", views.ContextListView.as_view()),
    path("openapi.json", SpectacularAPIView.as_view(urlconf=__name__), name="registry-openapi"),
    path(
        "docs/", SpectacularSwaggerView.as_view(url_name="registry-openapi"), name="registry-docs"
    ),
    re_path(r"^.*$", views.NotFoundView.as_view()),
]
