"""The one OpenAPI document (/api/schema/) keeps up with the registry and the REST proxy.

It is maintained by hand (registry/openapi_spec.py, restproxy/openapi_spec.py), so this test
is what keeps it honest: the document is valid OpenAPI 3.0; every URL route of both apps,
with each HTTP method its view serves, is documented (no raw regex paths); and every
documented operation, called in document order (deletions last, in reverse) with its own
examples through the Django test client, answers: never 404, 405 or 5xx, and a 2xx JSON
body matches the documented response schema. The values an example cannot know beforehand,
the cluster id and a group member's id, are read from the cluster under test.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver
from drf_spectacular.validation import validate_schema
from jsonschema import Draft202012Validator, ValidationError  # type: ignore[import-untyped]

from registry import urls as registry_urls
from restproxy import openapi_spec as restproxy_spec
from restproxy import urls as restproxy_urls

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def document(db: None) -> dict[str, Any]:
    response = Client().get("/api/schema/")
    assert response.status_code == 200
    return dict(response.json())


def template(pattern: URLPattern | URLResolver) -> str:
    """A route as an OpenAPI path with its parameters blanked: `/topics/{}/partitions`."""
    raw = str(pattern.pattern)
    raw = re.sub(r"\(\?P<\w+>[^)]*\)", "{}", raw)
    raw = re.sub(r"<(?:\w+:)?\w+>", "{}", raw)
    raw = re.sub(r"\[([a-z])[A-Z]\]", r"\1", raw)  # referenced[bB]y: Confluent's spelling
    raw = raw.removeprefix("^").removesuffix("$").removesuffix("/?")
    return "/" + raw


def served_methods(pattern: URLPattern) -> set[str]:
    view = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
    return {m for m in METHODS if view is not None and hasattr(view, m)}


def routes() -> Iterator[tuple[str, set[str]]]:
    mounts = [(settings.REGISTRY_PREFIX, [*registry_urls.other_patterns,
                                          *registry_urls.subject_patterns]),
              (settings.RESTPROXY_PREFIX, restproxy_urls.urlpatterns)]
    for prefix, patterns in mounts:
        for pattern in patterns:
            assert isinstance(pattern, URLPattern)
            yield "/" + prefix.strip("/") + template(pattern).rstrip("/"), served_methods(pattern)


def blank(path: str) -> str:
    return re.sub(r"\{\w+\}", "{}", path).rstrip("/")


def test_the_document_is_valid_openapi_with_schemas_and_error_bodies(
        document: dict[str, Any]) -> None:
    validate_schema(document)  # type: ignore[no-untyped-call]
    for path, item in document["paths"].items():
        assert "(?P<" not in path and "[" not in path, path
        for method, operation in item.items():
            responses = operation["responses"]
            assert any(code.startswith("2") for code in responses), (method, path)
            assert any(code[0] in "45" for code in responses), (method, path)
            body = operation.get("requestBody", {}).get("content", {})
            assert all("schema" in media and "example" in media for media in body.values())


def test_every_route_and_method_of_both_apps_is_documented(document: dict[str, Any]) -> None:
    documented = {blank(path): {m for m in item if m in METHODS}
                  for path, item in document["paths"].items()}
    missing = [(path, methods - documented.get(path, set())) for path, methods in routes()
               if methods - documented.get(path, set())]
    assert not missing, f"routes missing from the OpenAPI document: {missing}"
    unknown = set(documented) - {path for path, _ in routes()}
    assert not unknown, f"documented paths with no route: {unknown}"


def inline(node: Any, components: dict[str, Any]) -> Any:
    """An OpenAPI 3.0 schema as plain JSON Schema: refs inlined, `nullable` as a type."""
    if isinstance(node, list):
        return [inline(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return inline(components[node["$ref"].rsplit("/", 1)[1]], components)
    out = {k: inline(v, components) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable") and "type" in node:
        out["type"] = [node["type"], "null"]
    return out


def cluster_id(client: Client) -> str:
    return str(client.get(f"/{settings.RESTPROXY_PREFIX}v3/clusters").json()["data"][0][
        "cluster_id"])


def member_id(client: Client, cluster: str) -> str:
    """The consumer id of the example group's member (the v2 example instance), once it has
    joined: its subscription is answered before the group's rebalance completes, which on
    a loaded machine can take seconds."""
    url = (f"/{settings.RESTPROXY_PREFIX}v3/clusters/{cluster}/consumer-groups/"
           f"{restproxy_spec.GROUP}/consumers")
    deadline = time.monotonic() + 60
    members = client.get(url).json()["data"]
    while not members and time.monotonic() < deadline:
        time.sleep(0.2)
        members = client.get(url).json()["data"]
    assert members, f"the example group {restproxy_spec.GROUP} has no member"
    return str(members[0]["consumer_id"])


def call(client: Client, path: str, method: str, operation: dict[str, Any],
         live: dict[str, str]) -> Any:
    for param in operation.get("parameters", []):
        value = live.get(param["name"], param.get("example"))
        if param["in"] == "path":
            path = path.replace("{" + param["name"] + "}", str(value))
    query = {p["name"]: p["example"] for p in operation.get("parameters", [])
             if p["in"] == "query" and "example" in p}
    body: dict[str, Any] = operation.get("requestBody", {}).get("content", {})
    no_body: tuple[str, dict[str, Any]] = ("application/json", {})
    content_type, media = next(iter(body.items()), no_body)
    ok = next(v for k, v in operation["responses"].items() if k.startswith("2"))
    accept = next(iter(ok.get("content", {})), content_type)
    data = json.dumps(media["example"]).encode() if "example" in media else b""
    if query:
        path += "?" + "&".join(f"{k}={json.dumps(v) if isinstance(v, bool) else v}"
                               for k, v in query.items())
    return client.generic(method.upper(), path, data, content_type=content_type,
                          headers={"accept": accept})


def check(response: Any, path: str, method: str, operation: dict[str, Any],
          components: dict[str, Any]) -> None:
    where = f"{method.upper()} {path}: {response.status_code}"
    assert response.status_code not in (404, 405) and response.status_code < 500, (
        where, response.content[:300])
    documented = operation["responses"].get(str(response.status_code))
    if response.streaming or documented is None:
        return
    media = next(iter(documented.get("content", {}).values()), None)
    if media is not None and response.content:
        Draft202012Validator(inline(media["schema"], components)).validate(response.json())


def test_every_documented_operation_answers_its_own_example(
        transactional_db: None, proxy_cluster: str) -> None:
    document = dict(Client().get("/api/schema/").json())
    client = Client()
    operations = [(path, method, op) for path, item in document["paths"].items()
                  for method, op in item.items()]
    ordered = ([o for o in operations if o[1] != "delete"]
               + [o for o in reversed(operations) if o[1] == "delete"])
    components = document["components"]["schemas"]
    live = {"cluster_id": cluster_id(client)}
    failures = []
    for path, method, operation in ordered:
        if "{consumer}" in path and "consumer" not in live:
            live["consumer"] = member_id(client, live["cluster_id"])
        response = call(client, path, method, operation, live)
        try:
            check(response, path, method, operation, components)
        except (AssertionError, ValidationError) as exc:
            failures.append(f"{method.upper()} {path}: {exc}"[:600])
        if response.streaming:
            response.close()
    assert not failures, "\n".join(failures)


def test_swagger_ui_reads_the_document_without_a_cdn(db: None) -> None:
    page = Client().get("/api/docs/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "/api/schema/" in text
    # Every script, stylesheet and image comes from our own origin: no src or href names
    # another host (a CDN). Matching the word "cdn" instead failed once on a CSRF token.
    assets = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", text)
    assert assets
    assert [url for url in assets if re.match(r"(?:[a-z]+:)?//", url)] == []
