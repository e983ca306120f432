"""Concurrent registrations against several server processes on one PostgreSQL database."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from .conftest import field, record
from .live import registry_servers

ADMIN_URL = os.environ.get(
    "REGISTRY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DATABASE = "millrace_registry_test"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    database_url = ADMIN_URL.rsplit("/", 1)[0] + f"/{DATABASE}"
    data_dir: Path = tmp_path_factory.mktemp("registry-postgres")
    with registry_servers(database_url, data_dir, processes=3) as urls:
        yield urls


def _post_all(urls: list[str], requests: list[tuple[str, dict[str, str]]]) -> list[httpx.Response]:
    def send(index: int) -> httpx.Response:
        path, body = requests[index]
        return httpx.post(urls[index % len(urls)] + path, json=body, timeout=30)

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        return list(pool.map(send, range(len(requests))))


def test_concurrent_registrations_of_one_schema_get_one_id(servers: list[str]) -> None:
    schema = json.dumps(record("Same", field("a", "int")))
    requests = [(f"/subjects/same-{i % 4}/versions", {"schema": schema}) for i in range(24)]
    responses = _post_all(servers, requests)
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    assert len({r.json()["id"] for r in responses}) == 1
    for i in range(4):
        assert httpx.get(f"{servers[0]}/subjects/same-{i}/versions").json() == [1]


def test_concurrent_different_registrations_get_consecutive_versions(servers: list[str]) -> None:
    httpx.put(f"{servers[0]}/config/many", json={"compatibility": "NONE"})
    requests = [
        ("/subjects/many/versions", {"schema": json.dumps(record(f"R{i}", field("a", "int")))})
        for i in range(24)
    ]
    responses = _post_all(servers, requests)
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 24
    assert httpx.get(f"{servers[1]}/subjects/many/versions").json() == list(range(1, 25))
    by_version = {
        httpx.get(f"{servers[2]}/subjects/many/versions/{v}").json()["id"] for v in range(1, 25)
    }
    assert by_version == ids
