"""The browser harness's server (browser.serve) runs in its own fresh process yet sees what
the test arranged: its settings overrides, however made, and the data it committed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from brokercluster.ports import free_port
from millrace import asgi
from tests.controlcenter.browser import serve
from tests.controlcenter.conftest import PASSWORD


def project_application() -> Any:
    return asgi.application


def test_the_server_takes_override_settings_and_the_keywords_on_top(
    django_db_blocker: Any,
) -> None:
    outer, inner = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    with django_db_blocker.unblock(), override_settings(KAFKA_BOOTSTRAP_SERVERS=outer):
        with serve(project_application) as server:
            page = httpx.get(server.url + "/", timeout=30).text
        assert outer in page
        with serve("millrace.asgi:application", KAFKA_BOOTSTRAP_SERVERS=inner) as server:
            page = httpx.get(server.url + "/", timeout=30).text
        assert inner in page and outer not in page


def test_the_server_reads_what_the_test_committed(transactional_db: None) -> None:
    User.objects.create_user("harness", password=PASSWORD)
    with serve(lambda: asgi.application) as server, httpx.Client(base_url=server.url) as http:
        form = http.get("/login/")
        response = http.post("/login/?next=/audit/", data={
            "username": "harness", "password": PASSWORD,
            "csrfmiddlewaretoken": form.cookies["csrftoken"],
        })  # fmt: skip
        assert response.status_code == 302, response.text
        assert response.headers["location"] == "/audit/"


def test_the_server_is_a_fresh_interpreter_not_a_fork_of_pytest(
    django_db_blocker: Any,
) -> None:
    """A fork would carry pytest's command line (and its threads' memory); this one is
    started as its own program."""
    with django_db_blocker.unblock(), serve(project_application):
        commands = [command for pid in _children() if (command := _command_line(pid))]
    assert any(b"tests.controlcenter.liveserver" in command for command in commands), commands


def _children() -> list[str]:
    """Our processes' children, read thread by thread: a thread that ends between the
    listing and the read (pytest's and librdkafka's come and go) is skipped."""
    children = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            children += (task / "children").read_text().split()
        except FileNotFoundError:
            continue
    return children


def _command_line(pid: str) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return []


def test_an_app_the_server_cannot_import_is_refused_here() -> None:
    local_app = object()
    with pytest.raises(TypeError, match="module:attribute"), serve(lambda: local_app):
        pass
