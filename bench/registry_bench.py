"""Registry throughput against the framework's floor on the same server, in the same run.

Starts one Daphne process (SQLite in a temporary directory), then measures requests per
second for: a bare async Django view returning constant JSON (the floor), lookups by id,
lookups by schema (POST /subjects/{s}) and registrations. Prints each figure and its ratio
to the floor. Usage: .venv/bin/python bench/registry_bench.py [--seconds 5] [--connections 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.registry.live import registry_servers  # noqa: E402

PREFIX = "/schema-registry"


def request_bytes(method: str, path: str, body: bytes = b"") -> bytes:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Accept: application/vnd.schemaregistry.v1+json\r\n"
        "Content-Type: application/vnd.schemaregistry.v1+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _connection(host: str, port: int, make: object, until: float, counts: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    n = 0
    try:
        while time.monotonic() < until:
            writer.write(make(n))  # type: ignore[operator]
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = await reader.readexactly(length)
            if status != 200:
                raise RuntimeError(f"status {status}: {body[:300]!r}")
            n += 1
            counts[0] += 1
    finally:
        writer.close()


async def measure(url: str, make: object, seconds: float, connections: int) -> float:
    host, port = url.removeprefix("http://").split(":")
    counts = [0]
    start = time.monotonic()
    until = start + seconds
    await asyncio.gather(
        *(_connection(host, int(port), make, until, counts) for _ in range(connections))
    )
    return counts[0] / (time.monotonic() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.registry_settings"
    os.environ["MILLRACE_LOG_LEVEL"] = "WARNING"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        database = f"sqlite:///{data / 'db.sqlite3'}"
        with registry_servers(database, data, at_root=False) as (url,):
            run(url, args.seconds, args.connections)


def run(url: str, seconds: float, connections: int) -> None:
    import httpx

    # The platform's server: the floor view and the registry under its prefix.
    api = url + PREFIX
    schema = json.dumps(
        {"type": "record", "name": "Bench", "fields": [{"name": "a", "type": "int"}]}
    )
    httpx.put(f"{api}/config", json={"compatibility": "NONE"})
    registered = httpx.post(f"{api}/subjects/bench/versions", json={"schema": schema})
    schema_id = registered.json()["id"]
    lookup_body = json.dumps({"schema": schema}).encode()

    def register(n: int) -> bytes:
        text = json.dumps({"type": "record", "name": f"R{n}_{id(object())}", "fields": []})
        return request_bytes(
            "POST", PREFIX + "/subjects/bench-reg/versions", json.dumps({"schema": text}).encode()
        )

    cases = {
        "floor (bare async view)": lambda n: request_bytes("GET", "/bench/floor"),
        "lookup by id": lambda n: request_bytes("GET", f"{PREFIX}/schemas/ids/{schema_id}"),
        "lookup by schema": lambda n: request_bytes(
            "POST", PREFIX + "/subjects/bench", lookup_body
        ),
        "register (new schema)": register,
    }
    results: dict[str, float] = {}
    for name, make in cases.items():
        # SQLite: concurrent writers can fail with "database is locked"; register serially.
        clients = 1 if name.startswith("register") else connections
        asyncio.run(measure(url, make, 1.0, clients))  # warm up
        results[name] = asyncio.run(measure(url, make, seconds, clients))
    floor = results["floor (bare async view)"]
    print(f"{'case':<28}{'req/s':>10}{'of floor':>10}")
    for name, rate in results.items():
        print(f"{name:<28}{rate:>10.0f}{rate / floor:>10.0%}")


if __name__ == "__main__":
    main()
