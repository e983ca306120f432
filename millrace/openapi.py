"""One OpenAPI document for the registry and the REST proxy, served at /api/schema/.

Each app maintains its own description (`registry/openapi_spec.py`,
`restproxy/openapi_spec.py`) independent of how its views are written; this module mounts
their paths under the apps' URL prefixes on the web port and merges their components. The
Swagger UI at /api/docs/ (drf-spectacular's view with its sidecar assets, no CDN) reads it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from registry import openapi_spec as registry_spec
from restproxy import openapi_spec as restproxy_spec

DESCRIPTION = (
    "The Confluent-compatible schema registry and REST proxy (v2 and v3) of the Millrace "
    "platform, as mounted on the web port. Each also answers at the root of its own port "
    "(registry 8081, REST proxy 8082 by default): drop the `/{prefix}` part of a path there. "
    "Errors are Confluent's `{\"error_code\", \"message\"}` bodies.")


def _mounted(prefix: str, paths: dict[str, Any]) -> dict[str, Any]:
    base = "/" + prefix.strip("/")
    return {(base + "/" if path == "/" else base + path): item for path, item in paths.items()}


def document() -> dict[str, Any]:
    clash = set(registry_spec.COMPONENTS) & set(restproxy_spec.COMPONENTS)
    assert not clash, f"both apps define the components {sorted(clash)}"
    return {
        "openapi": "3.0.3",
        "info": {"title": "Millrace", "version": "0.1.0", "description": DESCRIPTION},
        "tags": [{"name": registry_spec.TAG}, {"name": restproxy_spec.V2},
                 {"name": restproxy_spec.V3}],
        "paths": {**_mounted(settings.REGISTRY_PREFIX, registry_spec.PATHS),
                  **_mounted(settings.RESTPROXY_PREFIX, restproxy_spec.PATHS)},
        "components": {"schemas": {**registry_spec.COMPONENTS, **restproxy_spec.COMPONENTS}},
    }


def schema_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(document(), json_dumps_params={"indent": 1})
