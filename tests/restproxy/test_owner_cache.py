"""A process remembers where other processes' consumer instances live (manager.OwnerCache),
and forgets it when any instance is created or deleted: three proxy processes, one name
re-created at another one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.restproxy.conftest import V2
from tests.restproxy.live import proxy_servers


@pytest.fixture(scope="module")
def three(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[list[str]]:
    data_dir: Path = tmp_path_factory.mktemp("restproxy-owners")
    with proxy_servers(kafka_bootstrap, data_dir, processes=3) as urls:
        yield urls[:3]


def create(http: httpx.Client, url: str, group: str, name: str) -> None:
    response = http.post(f"{url}/consumers/{group}", headers={"Content-Type": V2},
                         json={"name": name, "format": "binary"})
    assert response.status_code == 200, response.text


def subscribe(http: httpx.Client, url: str, group: str, name: str, topic: str) -> int:
    return http.post(f"{url}/consumers/{group}/instances/{name}/subscription",
                     headers={"Content-Type": V2}, json={"topics": [topic]}).status_code


def subscription(http: httpx.Client, url: str, group: str, name: str) -> list[str]:
    response = http.get(f"{url}/consumers/{group}/instances/{name}/subscription",
                        headers={"Accept": V2})
    assert response.status_code == 200, response.text
    return list(response.json()["topics"])


def test_a_re_created_instance_is_reached_at_its_new_owner(three: list[str]) -> None:
    first, second, third = three
    group, name = f"owners-{uuid.uuid4().hex[:6]}", "worker"
    with httpx.Client(timeout=30) as http:
        create(http, second, group, name)
        assert subscribe(http, second, group, name, "before") == 204
        for _ in range(3):  # the first process learns and then remembers the owner
            assert subscription(http, first, group, name) == ["before"]
        assert http.delete(f"{first}/consumers/{group}/instances/{name}").status_code == 204
        create(http, third, group, name)
        assert subscribe(http, third, group, name, "after") == 204
        assert subscription(http, first, group, name) == ["after"]
        assert http.delete(f"{first}/consumers/{group}/instances/{name}").status_code == 204
        gone = http.get(f"{first}/consumers/{group}/instances/{name}/subscription")
        assert (gone.status_code, gone.json()["error_code"]) == (404, 40403)
