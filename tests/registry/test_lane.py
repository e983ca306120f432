"""The fast lane (millrace/asgi.py, registry/lane.py) answers exactly what Django's
handler answers: every request is sent through both, in-process over ASGI, and the status,
headers and bytes compared; the lane must have answered the hot reads itself."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings

from millrace.asgi import ApiHandler, FastLane
from registry import lane as registry_lane
from restproxy import lane as proxy_lane

from .conftest import field, record

V1 = "application/vnd.schemaregistry.v1+json"
CONFLUENT_ACCEPT = f"{V1}, application/vnd.schemaregistry+json, application/json"
USER = json.dumps(record("User", field("name", "string")))
BASE = "http://127.0.0.1/" + settings.REGISTRY_PREFIX.rstrip("/")


class CountingDjango(ApiHandler):
    """Django's API handler, counting the requests the lane left to it."""

    served = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        type(self).served += 1
        await super().__call__(scope, receive, send)


django = CountingDjango()
fast = FastLane(django, [
    (settings.REGISTRY_PORT, settings.REGISTRY_PREFIX, registry_lane.routes()),
    (settings.RESTPROXY_PORT, settings.RESTPROXY_PREFIX, proxy_lane.routes()),
])


def call(app: Any, method: str, path: str, body: str | None = None,
         headers: dict[str, str] | None = None) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            return await client.request(method, BASE + path, content=body,
                                        headers=headers or {})

    return async_to_sync(send)()


def both(method: str, path: str, body: str | None = None,
         headers: dict[str, str] | None = None) -> tuple[httpx.Response, int]:
    """Django's answer first (it fills the reader cache), then the lane's: equal; and how
    many of the two requests Django served."""
    before = CountingDjango.served
    expected = call(django, method, path, body, headers)
    got = call(fast, method, path, body, headers)
    assert (got.status_code, got.content) == (expected.status_code, expected.content)
    assert sorted(got.headers.items()) == sorted(expected.headers.items())
    return got, CountingDjango.served - before


@pytest.fixture
def subject(transactional_db: None) -> str:
    response = call(django, "POST", "/subjects/lane-value/versions", json.dumps({"schema": USER}),
                    {"Content-Type": V1})
    assert response.json() == {"id": 1}, response.content
    return "lane-value"


@pytest.mark.parametrize("accept", [None, "*/*", V1, CONFLUENT_ACCEPT, "application/json",
                                    "application/vnd.schemaregistry+json"])
def test_hot_reads_answer_from_the_lane_as_django_does(subject: str, accept: str | None) -> None:
    headers = {"Accept": accept} if accept else {}
    lookup = json.dumps({"schema": USER})
    for method, path, body in [
        ("GET", "/schemas/ids/1", None),
        ("GET", "/schemas/ids/1/schema", None),
        ("GET", f"/subjects/{subject}/versions", None),
        ("GET", f"/subjects/{subject}/versions/latest", None),
        ("GET", f"/subjects/{subject}/versions/1", None),
        ("GET", f"/subjects/{subject}/versions/1/schema", None),
        ("GET", f"/subjects/%3A.%3A{subject}/versions?deleted=true", None),
        ("POST", f"/subjects/{subject}", lookup),
        ("POST", f"/subjects/{subject}/versions", lookup),  # already registered: its id
    ]:
        response, by_django = both(method, path, body, {**headers, "Content-Type": V1})
        assert response.status_code == 200
        assert by_django == 1, f"{method} {path} was not answered by the lane"


def test_errors_and_odd_requests_get_django_s_answer(subject: str) -> None:
    for method, path, body, headers in [
        ("GET", "/schemas/ids/987", None, {}),
        ("GET", "/subjects/nobody/versions", None, {}),
        ("GET", f"/subjects/{subject}/versions/7", None, {}),
        ("GET", "/schemas/ids/1", None, {"Accept": "text/html"}),
        ("GET", "/schemas/ids/1", None, {"Accept": f"{V1}; indent=4"}),
        ("GET", "/schemas/ids/1?format=json", None, {}),
        ("POST", f"/subjects/{subject}", "{not json", {"Content-Type": V1}),
        ("POST", f"/subjects/{subject}", json.dumps({"schema": USER}),
         {"Content-Type": "text/plain"}),
        ("POST", f"/subjects/{subject}", json.dumps({"schema": "{}"}), {"Content-Type": V1}),
        ("POST", f"/subjects/{subject}", json.dumps([1]), {}),
        ("POST", f"/subjects/{subject}", "", {}),
    ]:
        both(method, path, body, headers)


def test_a_new_registration_goes_to_django_and_then_reads_from_the_lane(subject: str) -> None:
    schema = json.dumps(record("User", field("name", "string"), field("age", "int", default=0)))
    registered = call(fast, "POST", f"/subjects/{subject}/versions",
                      json.dumps({"schema": schema}), {"Content-Type": V1})
    assert registered.json() == {"id": 2}
    response, by_django = both("GET", f"/subjects/{subject}/versions")
    assert response.json() == [1, 2] and by_django == 1


def test_json_schema_and_protobuf_reads_take_the_lane_too(subject: str) -> None:
    proto = 'syntax = "proto3";\nmessage Reading { string sensor = 1; int64 value = 2; }\n'
    for name, schema_type, text in [("json-value", "JSON", '{"type":"object"}'),
                                    ("proto-value", "PROTOBUF", proto)]:
        body = json.dumps({"schema": text, "schemaType": schema_type})
        registered = call(django, "POST", f"/subjects/{name}/versions", body,
                          {"Content-Type": V1})
        schema_id = registered.json()["id"]
        for method, path, sent in [
            ("GET", f"/schemas/ids/{schema_id}", None),
            ("GET", f"/schemas/ids/{schema_id}?format=serialized", None),
            ("GET", f"/subjects/{name}/versions/latest", None),
            ("GET", f"/subjects/{name}/versions/1?format=serialized", None),
            ("POST", f"/subjects/{name}", body),
            ("POST", f"/subjects/{name}/versions", body),
        ]:
            response, by_django = both(method, path, sent, {"Content-Type": V1})
            assert response.status_code == 200, response.content
            assert by_django == 1, f"{method} {path} was not answered by the lane"
