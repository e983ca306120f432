"""The registry's routes as the OpenAPI description shows them (a subject is one segment)."""

from django.urls import URLPattern, URLResolver

from .urls import other_patterns, subject_patterns

urlpatterns: list[URLPattern | URLResolver] = [*other_patterns, *subject_patterns]
