"""`python -m millrace.webserver`: the platform's HTTP and websocket server.

uvicorn, with uvloop's event loop, httptools' HTTP parser and the `websockets` library, in
`--workers` processes (MILLRACE_WEB_WORKERS; default one per core). This parent process
opens every `--bind` socket once; each worker accepts on all of them (the kernel spreads
connections), so one set of workers serves the control center's port and the registry's
and the proxy's own ports (`ports.PortRoutingMiddleware` routes by the port a connection
arrived on). The parent imports no Django: it only opens sockets and supervises workers,
restarting one that dies.

Several workers are several processes: a REST proxy consumer instance lives in one of
them. Each worker therefore also listens on a private port of its own and is told its
address there as RESTPROXY_INTERNAL_URL (plus `--internal-path`, the proxy's mount point),
so a request reaching another worker is forwarded to the owner (restproxy/instances/forwarding.py).

`--tls-bind` sockets are served over TLS with `--tls-cert`/`--tls-key` (PEM; the platform
passes MILLRACE_HTTP_TLS_CERT/_KEY for the registry's and the proxy's own ports): a second
uvicorn server in each worker, on the same event loop, so the control center's port and the
workers' private ports stay plain HTTP while those two speak HTTPS only.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

logger = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1
BACKLOG = 2048
# How long a thread waiting for the GIL lets the holder run before asking for it (Python's
# default is 5 ms). confluent-kafka takes the GIL once per delivery report on the
# producer's poll thread while the event loop parses requests: with 5 ms the reports of a
# busy worker trickled in, and side by side 0.5 ms doubled v2 produce (bench/README.md).
SWITCH_INTERVAL_S = 0.0005
# How long a worker told to stop waits for its connections to close before it exits anyway
# (uvicorn's default: forever). A TLS connection idle in a client's keep-alive pool closes
# only when that client answers the server's close_notify, and one that never reads it (the
# REST proxy's own registry client, in this very process) held every `--secure` platform's
# stop for 10-11 s (README.md, "Stopping").
GRACEFUL_SHUTDOWN_S = 3.0


def default_workers() -> int:
    """MILLRACE_WEB_WORKERS, or the number of cores this process may run on."""
    configured = os.environ.get("MILLRACE_WEB_WORKERS", "")
    return int(configured) if configured else len(os.sched_getaffinity(0))


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Worker:
    """One worker process: the shared sockets plus its private one, restarted if it dies."""

    def __init__(self, args: argparse.Namespace, shared: list[socket.socket],
                 private_host: str, tls: list[socket.socket] | None = None) -> None:
        self.args = args
        self.private = listen(private_host, 0)
        self.sockets = [*shared, self.private]
        self.tls = tls or []
        host = f"[{private_host}]" if ":" in private_host else private_host
        self.internal_url = f"http://{host}:{self.private.getsockname()[1]}{args.internal_path}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        fds = [s.fileno() for s in self.sockets]
        tls_fds = [s.fileno() for s in self.tls]
        env = dict(os.environ)
        if self.args.workers > 1:
            env["RESTPROXY_INTERNAL_URL"] = self.internal_url
        tls = ["--serve-tls-fds", ",".join(map(str, tls_fds)), "--tls-cert",
               self.args.tls_cert, "--tls-key", self.args.tls_key] if tls_fds else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "millrace.webserver", "--app", self.args.app,
             "--serve-fds", ",".join(map(str, fds)), "--log-level", self.args.log_level,
             *tls],
            pass_fds=fds + tls_fds, env=env, preexec_fn=_die_with_parent,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def reap(self, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def supervise(args: argparse.Namespace) -> None:
    binds = [_host_port(b) for b in args.bind]
    shared = [listen(host, port) for host, port in binds]
    tls = [listen(*_host_port(b)) for b in args.tls_bind]
    private_host = binds[0][0] if binds[0][0] not in ("", "0.0.0.0", "::") else "127.0.0.1"
    workers = [Worker(args, shared, private_host, tls) for _ in range(args.workers)]
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    for worker in workers:
        worker.start()
    while not stop.wait(0.5):
        for worker in workers:
            assert worker.proc is not None
            if worker.proc.poll() is not None:
                logger.error("web worker %s exited with %s; restarting it",
                             worker.proc.pid, worker.proc.returncode)
                time.sleep(0.5)
                worker.start()
    for worker in workers:
        worker.stop()
    for worker in workers:
        worker.reap(20.0)


def serve(app: str, fds: list[int], log_level: str, tls_fds: list[int] | None = None,
          tls_cert: str = "", tls_key: str = "") -> None:
    """One worker: uvicorn on the inherited sockets until SIGTERM; the `tls_fds` ones
    through a second uvicorn server with the certificate."""
    import uvicorn

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    sockets = [socket.socket(fileno=fd) for fd in fds]
    options: dict[str, Any] = {
        "loop": "uvloop", "http": "httptools", "ws": "websockets-sansio",
        "lifespan": "off",  # Django and Channels have no lifespan events
        "access_log": False, "log_level": log_level, "server_header": False,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
    }
    config = uvicorn.Config(app, **options)
    config.load()  # imports the app (Django, the APIs) now, to freeze it below
    secured = None
    if tls_fds:
        secured = uvicorn.Config(app, **options, ssl_certfile=tls_cert,
                                 ssl_keyfile=tls_key or None)
        secured.load()  # the same app object (an imported module's), plus the SSLContext
    # Move everything the import made out of the collector's reach: a full collection
    # would otherwise walk the whole of Django on every few thousand allocations a
    # request makes, a pause every request queued behind it pays (p99, bench/README.md).
    gc.freeze()
    if secured is None:
        uvicorn.Server(config).run(sockets=sockets)
        return
    servers = [(uvicorn.Server(config), sockets),
               (uvicorn.Server(secured), [socket.socket(fileno=fd) for fd in tls_fds or []])]
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve_together(servers))


async def _serve_together(servers: list[tuple[Any, list[socket.socket]]]) -> None:
    """Several uvicorn servers on one loop, all stopped by one SIGINT/SIGTERM. uvicorn's
    `serve` installs its own signal handlers, which a second server would replace, so the
    servers run its `_serve` (the same minus the handlers) under one handler here."""

    def stop(sig: int, frame: Any) -> None:
        for server, _ in servers:
            server.handle_exit(sig, frame)

    originals = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        await asyncio.gather(*(server._serve(socks) for server, socks in servers))
    finally:
        for sig, handler in originals.items():
            signal.signal(sig, handler)


def _host_port(bind: str) -> tuple[str, int]:
    host, _, port = bind.rpartition(":")
    return host.strip("[]"), int(port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", default="millrace.asgi:application")
    parser.add_argument("--bind", action="append", default=[],
                        help="host:port to serve on; repeat for several ports")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--internal-path", default="",
                        help="the proxy's mount point on a worker's private port, e.g. /kafka")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--tls-bind", action="append", default=[],
                        help="host:port to serve over TLS (needs --tls-cert); repeatable")
    parser.add_argument("--tls-cert", default="", help="PEM certificate chain (may hold the key)")
    parser.add_argument("--tls-key", default="", help="PEM private key, if not in --tls-cert")
    parser.add_argument("--serve-fds", help=argparse.SUPPRESS)  # a worker's inherited sockets
    parser.add_argument("--serve-tls-fds", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.serve_fds:
        serve(args.app, [int(fd) for fd in args.serve_fds.split(",")], args.log_level,
              [int(fd) for fd in (args.serve_tls_fds or "").split(",") if fd],
              args.tls_cert, args.tls_key)
        return
    if not args.bind or args.workers < 1:
        parser.error("give at least one --bind and one worker")
    if args.tls_bind and not args.tls_cert:
        parser.error("--tls-bind needs --tls-cert")
    supervise(args)


if __name__ == "__main__":
    main()
