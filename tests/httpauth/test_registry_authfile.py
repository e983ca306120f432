"""The registry with a Karapace authfile (httpauth/authfile.py): its users log in (hashed
as Karapace hashes them, so karapace_mkpasswd's entries work) and its permissions decide per
subject and for the global config; the cluster's SCRAM users are then not the registry's."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings

import httpauth
from httpauth.authfile import hash_password
from millrace.asgi import application

REGISTRY = "/" + settings.REGISTRY_PREFIX.rstrip("/")
V1 = "application/vnd.schemaregistry.v1+json"
SCHEMA = json.dumps({"type": "record", "name": "User",
                     "fields": [{"name": "name", "type": "string"}]})
USERS = [("admin", "sha512", "admin-pw"), ("reader", "scrypt", "reader-pw"),
         ("general", "sha256", "general-pw")]
PASSWORDS = {name: password for name, _, password in USERS}


@pytest.fixture
def authfile(tmp_path: Path, transactional_db: None) -> Iterator[None]:
    path = tmp_path / "authfile.json"
    path.write_text(json.dumps({
        "users": [{"username": name, "algorithm": algorithm, "salt": f"salt-{name}",
                   "password_hash": hash_password(algorithm, f"salt-{name}", password)}
                  for name, algorithm, password in USERS],
        "permissions": [
            {"username": "admin", "operation": "Write", "resource": ".*"},
            {"username": "reader", "operation": "Read", "resource": "Subject:general.*"},
            {"username": "reader", "operation": "Read", "resource": "Config:"},
            {"username": "general", "operation": "Write", "resource": "Subject:general.*"},
        ]}))
    # no cluster behind: the authfile's users never reach Kafka
    with override_settings(MILLRACE_HTTP_AUTH=True, MILLRACE_REGISTRY_AUTHFILE=str(path),
                           MILLRACE_HTTP_AUTH_BOOTSTRAP_SERVERS="127.0.0.1:9"):
        yield


def call(user: str, method: str, path: str, body: dict[str, Any] | None = None,
         password: str | None = None) -> httpx.Response:
    token = base64.b64encode(f"{user}:{password or PASSWORDS[user]}".encode()).decode()

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.request(method, REGISTRY + path,
                                   content=json.dumps(body) if body else None,
                                   headers={"Authorization": f"Basic {token}",
                                            "Content-Type": V1})

    return async_to_sync(send)()


def test_karapace_hashes_of_every_algorithm_log_in(authfile: None) -> None:
    for name, _, _ in USERS:
        assert call(name, "GET", "/schemas/types").status_code == 200
        wrong = call(name, "GET", "/schemas/types", password="wrong")
        assert wrong.status_code == 401 and wrong.json()["error_code"] == httpauth.UNAUTHORIZED
        assert wrong.headers["WWW-Authenticate"].startswith("Basic realm=")
    stranger = call("someone", "GET", "/subjects", password="x")
    assert stranger.status_code == 401


def test_permissions_per_subject_and_for_the_global_config(authfile: None) -> None:
    for subject in ("general-value", "private-value"):
        registered = call("admin", "POST", f"/subjects/{subject}/versions", {"schema": SCHEMA})
        assert registered.status_code == 200, registered.content
    assert call("reader", "GET", "/subjects/general-value/versions").status_code == 200
    assert call("reader", "GET", "/subjects/general-value/versions/1").status_code == 200
    assert call("reader", "POST", "/subjects/general-value", {"schema": SCHEMA}).status_code \
        == 200  # a lookup is a read
    assert call("reader", "GET", "/config").status_code == 200
    assert call("general", "POST", "/subjects/general-other/versions",
                {"schema": SCHEMA}).status_code == 200
    for user, method, path, body in [
        ("reader", "GET", "/subjects/private-value/versions", None),
        ("reader", "GET", "/subjects/private-value/versions/1", None),
        ("reader", "POST", "/subjects/general-value/versions", {"schema": SCHEMA}),
        ("reader", "PUT", "/config", {"compatibility": "NONE"}),
        ("reader", "PUT", "/config/general-value", {"compatibility": "NONE"}),
        ("general", "GET", "/config", None),
        ("general", "DELETE", "/subjects/private-value", None),
    ]:
        refused = call(user, method, path, body)
        assert refused.status_code == 403, (user, method, path, refused.content)
        assert refused.json() == {"error_code": 40301, "message": "Forbidden"}
    # a schema id is readable through any subject using it; lists show what may be read
    assert call("reader", "GET", "/schemas/ids/1").status_code == 200
    assert call("reader", "GET", "/subjects").json() == ["general-other", "general-value"]
    assert {entry["subject"] for entry in call("reader", "GET", "/schemas").json()} \
        == {"general-other", "general-value"}
    assert call("admin", "GET", "/subjects").json() == [
        "general-other", "general-value", "private-value"]


def test_an_unreadable_authfile_refuses_everyone_with_503(tmp_path: Path,
                                                         transactional_db: None) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"users": [{"username": "admin"}]')  # not even JSON
    with override_settings(MILLRACE_HTTP_AUTH=True, MILLRACE_REGISTRY_AUTHFILE=str(broken)):
        for path in ("/subjects", "/schemas/ids/1"):
            refused = call("admin", "GET", path)
            assert refused.status_code == 503 and refused.json()["error_code"] == 50302
