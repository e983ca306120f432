"""The Confluent Schema Registry API; mounted under REGISTRY_PREFIX and at the root of
REGISTRY_PORT.

Subjects may contain `/`, sent as %2F. Paths that hold a subject are therefore routed twice:
Django's resolver hands the whole tail to `views.route_by_raw_path`, which resolves the raw
path against `subject_patterns`, where a subject is one segment.
"""

from django.urls import URLPattern, URLResolver, path, re_path
from django.urls.resolvers import RegexPattern

from . import views

S = r"(?P<subject>[^/]+)"
V = r"(?P<version>[^/]+)"

subject_patterns: list[URLPattern | URLResolver] = [
    re_path(rf"^subjects/{S}/versions/{V}/schema$", views.VersionSchemaView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}/referenced[bB]y$", views.ReferencedByView.as_view()),
    re_path(rf"^subjects/{S}/versions/{V}$", views.VersionView.as_view()),
    re_path(rf"^subjects/{S}/versions$", views.VersionListView.as_view()),
    re_path(rf"^subjects/{S}$", views.SubjectView.as_view()),
    re_path(
        rf"^compatibility/subjects/{S}/versions/{V}$", views.CompatibilityVersionView.as_view()
    ),
    re_path(rf"^compatibility/subjects/{S}/versions$", views.CompatibilityView.as_view()),
    re_path(rf"^config/{S}$", views.ConfigView.as_view()),
    re_path(rf"^mode/{S}$", views.ModeView.as_view()),
]
subject_resolver = URLResolver(RegexPattern(r"^"), subject_patterns)

other_patterns: list[URLPattern | URLResolver] = [
    path("", views.RootView.as_view()),
    path("subjects", views.SubjectListView.as_view()),
    path("schemas", views.SchemaListView.as_view()),
    path("schemas/types", views.SchemaTypesView.as_view()),
    path("schemas/ids/<int:schema_id>", views.SchemaByIdView.as_view()),
    path("schemas/ids/<int:schema_id>/schema", views.SchemaTextByIdView.as_view()),
    path("schemas/ids/<int:schema_id>/subjects", views.SchemaSubjectsView.as_view()),
    path("schemas/ids/<int:schema_id>/versions", views.SchemaVersionsView.as_view()),
    path("config", views.ConfigView.as_view()),
    path("mode", views.ModeView.as_view()),
    path("contexts", views.ContextListView.as_view()),
]

urlpatterns: list[URLPattern | URLResolver] = [
    *other_patterns,
    re_path(r"^(?P<tail>(?:compatibility/)?(?:subjects|config|mode)/.+)$", views.route_by_raw_path),
    re_path(r"^.*$", views.NotFoundView.as_view()),
]
