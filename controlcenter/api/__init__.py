"""The control center's JSON API (DRF, documented by drf-spectacular at /api/docs/), under
/api/v1/: one module per group of pages, each with its own `urlpatterns`."""
