"""The browser tests' server process: `python -m tests.controlcenter.liveserver APP`.

`browser.serve()` starts it as a fresh interpreter, never as a fork of pytest: by the time a
browser test runs, the pytest process holds threads (librdkafka clients, Playwright's driver,
asgiref's executors, the channel hub's I/O thread) and a forked child inherits their memory,
locks held mid-operation included, without the threads; a librdkafka client inherited that
way crashed the server with a segmentation fault.

Settings: the module in DJANGO_SETTINGS_MODULE, overridden by the JSON object in
MILLRACE_LIVE_SERVER_SETTINGS (the test database, the test's settings overrides).
APP is "module:attribute", the ASGI application; with --factory, "module:function", a
function without arguments that returns it. Daphne serves it on 127.0.0.1, on a port the
system picks, and writes "port N" as the one line of stdout once it listens.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from daphne.server import Server

SETTINGS_VARIABLE = "MILLRACE_LIVE_SERVER_SETTINGS"


def configure_django() -> None:
    import django
    from django.conf import Settings, settings

    overrides = json.loads(os.environ.get(SETTINGS_VARIABLE, "{}"))
    settings.configure(Settings(os.environ["DJANGO_SETTINGS_MODULE"]), **overrides)
    django.setup()


def load(path: str, factory: bool) -> Any:
    module_name, _, attribute = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for name in attribute.split("."):
        target = getattr(target, name)
    return target() if factory else target


def announce_port(server: Server) -> None:
    """Tell the parent the port, then send any later stdout to stderr, which the parent
    does not read from a pipe that could fill up."""
    print(f"port {server.listening_addresses[0][1]}", flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app", help='"module:attribute"')
    parser.add_argument("--factory", action="store_true", help="APP returns the application")
    args = parser.parse_args()
    # Imported here, not by browser.py in pytest, and before Django: it installs Twisted's
    # asyncio reactor, which must come before anything imports a reactor.
    from daphne.server import Server

    configure_django()
    server = Server(load(args.app, args.factory), endpoints=["tcp:port=0:interface=127.0.0.1"])
    # Daphne calls this once its listening socket is bound, just before its loop starts.
    server.ready_callable = lambda: announce_port(server)
    server.run()


if __name__ == "__main__":
    main()
