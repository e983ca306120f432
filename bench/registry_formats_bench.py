"""JSON Schema and Protobuf in the registry against Avro, side by side in one run.

In process (Django, a fresh SQLite database, `registry.actions` and `registry.lookups` as
the views call them), interleaved in rounds, each format on schemas of the same shape
(a record/object/message of 8 to 11 fields):

  register      a new schema, each time a new one (another doc string, or an enum
                constant's name), under BACKWARD against the previous version (parse,
                canonical text, fingerprint, compatibility, insert)
  compatibility a schema with a field more checked against a subject's latest version,
                each time a text the process has not parsed (parse and check)
  compat only   the check alone on parsed schemas (the format's rules)

Over HTTP, with `wrk` (16 connections) against one registry web server (the platform's,
one worker): `GET /schemas/ids/{id}` for each format, and Protobuf's
`?format=serialized` (what confluent-kafka's ProtobufDeserializer asks for). Each line
shows the rate and its ratio to Avro's.

    .venv/bin/python bench/registry_formats_bench.py [--count 200] [--rounds 3] [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.http_bench import free_port, lua_fixed, run_wrk, wait_http  # noqa: E402

FIELDS = 8
FORMATS = ("AVRO", "JSON", "PROTOBUF")
SR = "application/vnd.schemaregistry.v1+json"


def schema_text(schema_type: str, n: int, extra: int = 0, variant: int = 0) -> str:
    """Schema number `n` of a format; `extra` optional fields added (a compatible change);
    `variant` changes a doc string (Avro, JSON) or an enum constant's name (Protobuf): a
    new schema of the same size, compatible with the others."""
    if schema_type == "AVRO":
        fields: list[dict[str, Any]] = [
            {"name": f"f{i}", "type": "long" if i % 2 else "string"} for i in range(FIELDS)]
        fields += [{"name": f"x{i}", "type": "int", "default": 0} for i in range(extra)]
        return json.dumps({"type": "record", "name": f"R{n}", "namespace": "bench",
                           "doc": f"variant {variant}", "fields": fields})
    if schema_type == "JSON":
        properties = {f"f{i}": {"type": "integer" if i % 2 else "string"} for i in range(FIELDS)}
        properties.update({f"x{i}": {"type": "integer"} for i in range(extra)})
        return json.dumps({"$schema": "http://json-schema.org/draft-07/schema#",
                           "title": f"R{n}", "description": f"variant {variant}",
                           "type": "object", "properties": properties,
                           "required": ["f0"], "additionalProperties": False})
    lines = [f"  {'int64' if i % 2 else 'string'} f{i} = {i + 1};" for i in range(FIELDS)]
    lines += [f"  int32 x{i} = {100 + i};" for i in range(extra)]
    return ('syntax = "proto3";\npackage bench;\n' + f"message R{n} {{\n" + "\n".join(lines)
            + f"\n}}\nenum Variant {{ VARIANT_{variant} = 0; }}\n")


def setup_django(data_dir: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{data_dir / 'db.sqlite3'}"
    os.environ["MILLRACE_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlcenter.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def rate(count: int, run: Callable[[int], None]) -> float:
    started = time.perf_counter()
    for n in range(count):
        run(n)
    return count / (time.perf_counter() - started)


def in_process(count: int, rounds: int) -> dict[str, dict[str, float]]:
    from registry import actions, formats, lookups
    from registry.actions import SchemaRequest

    results: dict[str, dict[str, list[float]]] = {f: {} for f in FORMATS}
    for round_number in range(rounds):
        order = FORMATS if round_number % 2 == 0 else tuple(reversed(FORMATS))
        for schema_type in order:
            base = 1_000_000 * (round_number + 1)
            subject = f"bench-{schema_type}-{round_number}"

            def register(n: int, schema_type: str = schema_type, subject: str = subject,
                         base: int = base) -> None:
                # One record of one size, a new doc each time: compatible versions.
                text = schema_text(schema_type, base, extra=2, variant=n)
                actions.register_schema(subject, SchemaRequest(text, schema_type), False)

            def check(n: int, schema_type: str = schema_type, subject: str = subject,
                      base: int = base) -> None:
                text = schema_text(schema_type, base, extra=3, variant=count + 1 + n)
                parsed, _ = SchemaRequest(text, schema_type).parse(False)
                lookups.compatibility_messages(subject, parsed, None, schema_type)

            schema_format = formats.get(schema_type)
            old = schema_format.parse(schema_text(schema_type, 1), [], False)
            new = schema_format.parse(schema_text(schema_type, 1, extra=3), [], False)

            def rules(n: int, schema_format: formats.SchemaFormat = schema_format,
                      new: formats.ParsedSchema = new, old: formats.ParsedSchema = old) -> None:
                schema_format.reader_incompatibilities(new, old)

            for name, run, times in (("register", register, count),
                                     ("compatibility", check, count),
                                     ("compat only", rules, count * 10)):
                results[schema_type].setdefault(name, []).append(rate(times, run))
    return {f: {k: statistics.median(v) for k, v in r.items()} for f, r in results.items()}


@contextmanager
def registry_server(data_dir: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "MILLRACE_REGISTRY_PORT": str(port)}
    server = subprocess.Popen(
        [sys.executable, "-m", "controlcenter.webserver", "--bind", f"127.0.0.1:{port}",
         "--workers", "1"], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/", server)
        yield url
    finally:
        server.terminate()
        with suppress(subprocess.TimeoutExpired):
            server.wait(timeout=10)


def over_http(url: str, seconds: float, rounds: int) -> dict[str, float]:
    cases: dict[str, str] = {}
    for schema_type in FORMATS:
        answer = httpx.post(f"{url}/subjects/http-{schema_type}/versions",
                            json={"schema": schema_text(schema_type, 7),
                                  "schemaType": schema_type})
        schema_id = answer.raise_for_status().json()["id"]
        cases[f"id lookup {schema_type}"] = f"/schemas/ids/{schema_id}"
        if schema_type == "PROTOBUF":
            cases["id lookup PROTOBUF serialized"] = f"/schemas/ids/{schema_id}?format=serialized"
    rates: dict[str, list[float]] = {name: [] for name in cases}
    for round_number in range(rounds):
        names = list(cases) if round_number % 2 == 0 else list(reversed(cases))
        for name in names:
            httpx.get(url + cases[name]).raise_for_status()  # warm the reader cache
            result = run_wrk(url, lua_fixed("GET", cases[name], {"Accept": SR}), seconds,
                             16, 2, 1)
            if result.failed:
                raise RuntimeError(f"{name}: {result.failed} failed requests")
            rates[name].append(result.requests_per_s)
    return {name: statistics.median(values) for name, values in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200, help="schemas per format and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5, help="wrk seconds per case")
    parser.add_argument("--no-http", action="store_true", help="skip the wrk cases")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the registry logs every registration
    with tempfile.TemporaryDirectory(prefix="registry-formats-bench-") as directory:
        data_dir = Path(directory)
        setup_django(data_dir)
        local = in_process(args.count, args.rounds)
        print(f"{'in process (per second)':<32}" + "".join(f"{f:>12}" for f in FORMATS)
              + "".join(f"{f + '/AVRO':>16}" for f in FORMATS[1:]))
        for case in ("register", "compatibility", "compat only"):
            values = [local[f][case] for f in FORMATS]
            print(f"{case:<32}" + "".join(f"{v:>12.0f}" for v in values)
                  + "".join(f"{v / values[0]:>16.2f}" for v in values[1:]))
        if args.no_http:
            return
        with registry_server(data_dir) as url:
            remote = over_http(url, args.seconds, args.rounds)
        avro = remote["id lookup AVRO"]
        print(f"\n{'over HTTP, wrk -c16':<36}{'req/s':>10}{'/AVRO':>8}")
        for name, value in remote.items():
            print(f"{name:<36}{value:>10.0f}{value / avro:>8.2f}")


if __name__ == "__main__":
    main()
