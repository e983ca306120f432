from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from registry.cache import reader_cache

V1 = "application/vnd.schemaregistry.v1+json"
PREFIX = "/schema-registry"


class Api:
    """The registry under its prefix, through Django's test client."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        data = None if body is None else json.dumps(body)
        kwargs: dict[str, Any] = {"content_type": headers.pop("content_type", V1)}
        # What a server passes on as the raw path; "" leaves it out.
        raw_uri = headers.pop("RAW_URI", PREFIX + path)
        if raw_uri:
            kwargs["RAW_URI"] = raw_uri
        kwargs.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
        response = getattr(self.client, method)(PREFIX + path, data, **kwargs)
        response.body = json.loads(response.content) if response.content else None
        return response

    def get(self, path: str, **headers: str) -> Any:
        return self.call("get", path, **headers)

    def post(self, path: str, body: Any = None, **headers: str) -> Any:
        return self.call("post", path, body, **headers)

    def put(self, path: str, body: Any = None, **headers: str) -> Any:
        return self.call("put", path, body, **headers)

    def delete(self, path: str, **headers: str) -> Any:
        return self.call("delete", path, **headers)

    def register(self, subject: str, schema: Any, **extra: Any) -> Any:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return self.post(f"/subjects/{quote(subject, safe='')}/versions", {"schema": text, **extra})


@pytest.fixture(autouse=True)
def fresh_reader_cache() -> Iterator[None]:
    # Each test's database is rolled back, so ids are reused between tests.
    reader_cache.invalidate()
    yield
    reader_cache.invalidate()


@pytest.fixture
def api(db: None, client: Client) -> Api:
    return Api(client)


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


@pytest.fixture(scope="session")
def live_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two registry processes on SQLite sharing one data directory."""
    from .live import registry_servers

    data_dir = tmp_path_factory.mktemp("registry-live")
    with registry_servers(f"sqlite:///{data_dir / 'db.sqlite3'}", data_dir, processes=2) as urls:
        yield urls
