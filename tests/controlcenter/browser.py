"""Browser tests of the control center: real Chromium, a real Daphne server.

- `serve(get_application, **settings)`: Daphne in a fresh Python process (liveserver.py)
  on a free port, over this test session's database; HTTP and websockets.
- `launch(playwright)`: Debian's /usr/bin/chromium through Playwright (never a browser that
  `playwright install` downloads).
- `Browser`: a page that saves a screenshot of every page it visits, and of any moment a
  test names, into var/screenshots/<test name>/ (gitignored; look at them).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath
from types import ModuleType
from typing import Any

from django.conf import UserSettingsHolder
from django.conf import settings as django_settings
from django.db.backends.sqlite3.creation import DatabaseCreation

from tests.brokerproc import REPO
from tests.controlcenter import liveserver

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
SCREENSHOT_DIR = REPO / "var" / "screenshots"


@dataclass(frozen=True)
class LiveServer:
    url: str  # http://127.0.0.1:PORT


@contextmanager
def serve(get_application: Callable[[], Any] | str, **settings: Any) -> Iterator[LiveServer]:
    """Daphne serving an ASGI app in a fresh Python process (tests/controlcenter/liveserver.py;
    never a fork of this one, whose threads a fork would corrupt), over this test session's
    database, with this process's settings overrides and `settings` on top (e.g.
    ROOT_URLCONF, KAFKA_BOOTSTRAP_SERVERS). Data a test writes must be committed for the
    server to see it (`django_db_blocker.unblock()`, `transactional_db`).

    The app: "module:attribute"; or a function without arguments returning it, defined at
    a module's top level (called in the server); or a lambda returning an app that is a
    module's attribute (`lambda: asgi.application`)."""
    app, factory = _application_path(get_application)
    process = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "tests.controlcenter.liveserver", app,
         *(["--factory"] if factory else [])],
        cwd=REPO, env=_server_environment(settings), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield LiveServer(f"http://127.0.0.1:{_wait_for_port(process)}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _application_path(get_application: Callable[[], Any] | str) -> tuple[str, bool]:
    """Where the server process finds the app: ("module:attribute", is it a factory)."""
    if isinstance(get_application, str):
        return get_application, False
    module, name = get_application.__module__, get_application.__qualname__
    if "<" not in name:  # neither a lambda nor a function defined inside another
        return f"{module}:{name}", True
    app = get_application()
    namespace = get_application.__globals__
    for attribute, value in namespace.items():
        if value is app:
            return f"{module}:{attribute}", False
        if isinstance(value, ModuleType):
            found = next((a for a, v in vars(value).items() if v is app), None)
            if found is not None:
                return f"{value.__name__}:{found}", False
    raise TypeError(
        f"serve() runs the app in another process and cannot import {name} from {module}: "
        'pass "module:attribute" or a function defined at the top level of a module'
    )


def _server_environment(extra: dict[str, Any]) -> dict[str, str]:
    """This process's environment, minus what only suits tests, plus the settings: the ones
    overridden here (override_settings, pytest-django's `settings`), this session's test
    databases (pytest-django renamed them in DATABASES), then `extra`."""
    holders, root = [], django_settings._wrapped  # type: ignore[misc]
    while isinstance(root, UserSettingsHolder):
        holders.append(root)
        root = root.default_settings
    overrides: dict[str, Any] = {}
    for holder in reversed(holders):  # the innermost override wins
        overrides.update((k, v) for k, v in vars(holder).items() if k.isupper())
    overrides["DATABASES"] = django_settings.DATABASES
    overrides.update(extra)
    for alias, database in overrides["DATABASES"].items():
        sqlite = database["ENGINE"].endswith("sqlite3")
        if sqlite and DatabaseCreation.is_in_memory_db(database["NAME"]):
            raise ValueError(f"database {alias!r} is in memory: another process cannot open it")
    # The chromium fixture allows the ORM in async code in this process only; the server
    # must refuse it, as it does in production.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env["DJANGO_SETTINGS_MODULE"] = root.SETTINGS_MODULE
    env[liveserver.SETTINGS_VARIABLE] = json.dumps(overrides, default=_path_or_refuse)
    return env


def _path_or_refuse(value: Any) -> str:
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"a setting holds a {type(value).__name__}: it cannot reach the server")


def _wait_for_port(process: subprocess.Popen[str]) -> int:
    """The port the server announces once it listens; its errors go to pytest's captured
    stderr, which pytest shows with the failing test."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], 60)
    line = process.stdout.readline() if ready else ""
    process.stdout.close()
    if not line.startswith("port "):
        process.kill()
        raise RuntimeError(
            f"Daphne did not start (exit status {process.wait()}); its stderr is above"
        )
    return int(line.split()[1])


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
    )


class Browser:
    """One browser context (its own cookies) with one page, bound to a server."""

    def __init__(self, chromium: Any, server: LiveServer, test_name: str) -> None:
        self.server = server
        self.context = chromium.new_context(
            viewport={"width": 1360, "height": 860}, base_url=server.url
        )
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.shots = SCREENSHOT_DIR / re.sub(r"[^\w.-]+", "_", test_name)
        self.shots.mkdir(parents=True, exist_ok=True)
        for old in self.shots.glob("*.png"):
            old.unlink()
        self.taken = 0

    def visit(self, path: str) -> Any:
        """Open `path`, wait until it has loaded, save its screenshot; the response."""
        response = self.page.goto(path)
        self.page.wait_for_load_state("load")
        self.snap(path)
        return response

    def snap(self, name: str) -> Path:
        self.taken += 1
        slug = re.sub(r"[^\w.-]+", "_", name).strip("_") or "root"
        target = self.shots / f"{self.taken:02d}-{slug}.png"
        self.page.screenshot(path=str(target), full_page=True)
        return target

    def login(self, username: str, password: str, then: str = "/audit/") -> None:
        """Through the real form, as a person would; `then` is the page to return to
        (the default, the overview, would need a cluster)."""
        self.visit(f"/login/?next={then}")
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", password)
        with self.page.expect_navigation():
            self.page.click("button[type=submit]")
        self.snap("signed-in")

    def close(self) -> None:
        self.context.close()
