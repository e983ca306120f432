"""Browser tests of the control center: real Chromium, a real Daphne server.

- `serve(get_application, urlconf)`: Daphne in a forked process (Channels' DaphneProcess)
  on a free port, over this test session's database; HTTP and websockets.
- `launch(playwright)`: Debian's /usr/bin/chromium through Playwright (never a browser that
  `playwright install` downloads).
- `Browser`: a page that saves a screenshot of every page it visits, and of any moment a
  test names, into var/screenshots/<test name>/ (gitignored; look at them).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from asgiref.sync import SyncToAsync
from channels.layers import channel_layers
from daphne.testing import DaphneProcess
from django.db import connections
from django.test.utils import override_settings

from tests.brokerproc import REPO

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
def serve(get_application: Callable[[], Any], **settings: Any) -> Iterator[LiveServer]:
    """Daphne serving `get_application()` in a child process forked from this one, so it
    sees the test database and `settings` (e.g. ROOT_URLCONF, KAFKA_BOOTSTRAP_SERVERS).
    This process keeps its own: the override lasts only until the child has forked."""
    connections.close_all()  # a child must not share this process's database sockets
    with override_settings(**settings):
        process = DaphneProcess("127.0.0.1", partial(_after_fork, get_application))
        process.start()
    try:
        deadline = time.monotonic() + 60
        while not process.ready.wait(timeout=0.5):
            if not process.is_alive() or time.monotonic() > deadline:
                error = "" if process.errors.empty() else process.errors.get(False)[1]
                raise RuntimeError(f"Daphne did not start:\n{error}")
        yield LiveServer(f"http://127.0.0.1:{process.port.value}")
    finally:
        process.terminate()
        process.join(timeout=10)


def _after_fork(get_application: Callable[[], Any]) -> Any:
    """Runs in the child. A fork copies objects but not the threads behind them: asgiref's
    one-thread executor (used by database_sync_to_async in websocket consumers) would
    wait forever for a worker the parent started, and a channel layer would hold queues of
    the parent's event loop. Start both afresh."""
    SyncToAsync.single_thread_executor = ThreadPoolExecutor(max_workers=1)
    channel_layers.backends = {}
    return get_application()


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
