"""The Confluent Schema Registry API; mounted under REGISTRY_PREFIX and at the root of
REGISTRY_PORT.

Subjects may contain `/`, sent as %2F. Paths that hold a subject are therefore routed twice:
Django's resolver hands the whole tail to `route_by_raw_path`, which resolves the raw
path against `subject_patterns`, where a subject is one segment.
"""

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import Resolver404, URLPattern, URLResolver, path, re_path
from django.urls.resolvers import RegexPattern
from django.views.decorators.csrf import csrf_exempt

from . import params, views
from .views import served

S = r"(?P<subject>[^/]+)"
V = r"(?P<version>[^/]+)"

subject_patterns: list[URLPattern | URLResolver] = [
    re_path(rf"^subjects/{S}/versions/{V}/schema$", served(views.VersionSchemaView)),
    re_path(rf"^subjects/{S}/versions/{V}/referenced[bB]y$", served(views.ReferencedByView)),
    re_path(rf"^subjects/{S}/versions/{V}$", served(views.VersionView)),
    re_path(rf"^subjects/{S}/versions$", served(views.VersionListView)),
    re_path(rf"^subjects/{S}$", served(views.SubjectView)),
    re_path(
        rf"^compatibility/subjects/{S}/versions/{V}$", served(views.CompatibilityVersionView)
    ),
    re_path(rf"^compatibility/subjects/{S}/versions$", served(views.CompatibilityView)),
    re_path(rf"^config/{S}$", served(views.ConfigView)),
    re_path(rf"^mode/{S}$", served(views.ModeView)),
]
subject_resolver = URLResolver(RegexPattern(r"^"), subject_patterns)
not_found = served(views.NotFoundView)


@csrf_exempt
async def route_by_raw_path(request: HttpRequest, tail: str) -> HttpResponseBase:
    """Route paths that hold a subject on the raw path (see `params.raw_tail`)."""
    try:
        match = subject_resolver.resolve(params.raw_tail(request, tail))
    except Resolver404:
        response: HttpResponseBase = await not_found(request)
        return response
    return await match.func(request, *match.args, **match.kwargs)  # type: ignore[no-any-return]


other_patterns: list[URLPattern | URLResolver] = [
    path("", served(views.RootView)),
    path("subjects", served(views.SubjectListView)),
    path("schemas", served(views.SchemaListView)),
    path("schemas/types", served(views.SchemaTypesView)),
    path("schemas/ids/<int:schema_id>", served(views.SchemaByIdView)),
    path("schemas/ids/<int:schema_id>/schema", served(views.SchemaTextByIdView)),
    path("schemas/ids/<int:schema_id>/subjects", served(views.SchemaSubjectsView)),
    path("schemas/ids/<int:schema_id>/versions", served(views.SchemaVersionsView)),
    path("config", served(views.ConfigView)),
    path("mode", served(views.ModeView)),
    path("contexts", served(views.ContextListView)),
]

urlpatterns: list[URLPattern | URLResolver] = [
    *other_patterns,
    re_path(r"^(?P<tail>(?:compatibility/)?(?:subjects|config|mode)/.+)$", route_by_raw_path),
    re_path(r"^.*$", not_found),
]
