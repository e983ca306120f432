"""REST proxy fixtures: the proxy in-process (Django test client) over the session broker."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from django.conf import settings
from django.test import Client

from restproxy.client import reset_gateway
from restproxy.instances.manager import manager
from restproxy.schemas import reset_registry
from tests.restproxy.live import proxy_servers

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"


@pytest.fixture(scope="session")
def proxy_cluster(kafka_bootstrap: str) -> Iterator[str]:
    """Points the in-process proxy at the session broker."""
    previous = settings.KAFKA_BOOTSTRAP_SERVERS
    settings.KAFKA_BOOTSTRAP_SERVERS = kafka_bootstrap
    reset_gateway()
    yield kafka_bootstrap
    manager().close_all()
    reset_gateway()
    settings.KAFKA_BOOTSTRAP_SERVERS = previous


class Proxy:
    """Tiny JSON client over Django's test client, mounted at the proxy prefix."""

    def __init__(self, prefix: str = "/" + settings.RESTPROXY_PREFIX) -> None:
        self.client = Client()
        self.prefix = prefix

    def url(self, path: str) -> str:
        return path if path.startswith("http") else self.prefix + path.lstrip("/")

    def request(self, method: str, path: str, body: Any = None, content_type: str = V2,
                accept: str | None = None, raw: bytes | None = None) -> Any:
        import json

        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        headers = {"accept": accept} if accept else {}
        return self.client.generic(method, self.url(path), data, content_type=content_type,
                                   headers=headers)

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.request("POST", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.request("DELETE", path, **kw)


@pytest.fixture
def proxy(proxy_cluster: str) -> Proxy:
    return Proxy()


@pytest.fixture(scope="session")
def admin(proxy_cluster: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": proxy_cluster})


@pytest.fixture
def new_topic(admin: AdminClient) -> Callable[..., str]:
    def make(partitions: int = 1, prefix: str = "rp") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(15)
        return name
    return make


@pytest.fixture(scope="module")
def registry_url(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[str]:
    """A real registry process for the module; the in-process proxy registers and looks
    schemas up there."""
    with proxy_servers(kafka_bootstrap, tmp_path_factory.mktemp("registry"), processes=0) as urls:
        previous = settings.SCHEMA_REGISTRY_URL
        settings.SCHEMA_REGISTRY_URL = urls[0]
        reset_registry()
        yield urls[0]
        settings.SCHEMA_REGISTRY_URL = previous
        reset_registry()
