"""The HTTP path at the speed of the machine: registry and REST proxy against their floors.

One run, `wrk` as the load generator (a real one, not Python on the same cores). It starts,
one after another on free ports: a bare ASGI app and a bare Django async view (no
middleware) under the chosen server and worker count, then `manage.py platform` (its
built-in cluster and web server, the platform's own defaults), and measures:

  floors      the bare ASGI app; the bare Django async view
  registry    GET /schemas/ids/{id}; POST /subjects/{s} (lookup by schema); registration
  REST proxy  v2 produce of 100 records of 100 bytes (binary, json); v3 produce of one
              record; v3 streaming produce (chunked, 1,000 records a request); v2 consume
              (one consumer instance per wrk thread, each assigned its own partition)

Each line gives requests/s, records/s, the share of the ASGI floor and of the Django floor,
p50/p99 latency and the count of non-2xx answers. `--server` and `--workers` run the floors
under another ASGI server (to compare servers); the platform always runs its own.

`--baseline REF` also starts the platform of an older commit (an export of `git archive REF`,
run with this virtualenv) beside this tree's, and measures every case on both, alternating
within each round (this tree first in odd rounds, the baseline first in even ones), so both
meet the same load. The table then shows both side by side with the ratio this/baseline.

    .venv/bin/python bench/http_bench.py [--seconds 5] [--rounds 3] [--connections 16]
                                         [--only "v3 streaming"] [--baseline REF]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = b"x" * 100
V2 = "application/vnd.kafka.v2+json"
SR = "application/vnd.schemaregistry.v1+json"
BATCH = 100  # records per v2 produce request
STREAM = 1000  # records per v3 streaming request, sent as 10 chunks


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_server() -> tuple[str, int]:
    """The platform's server and worker count (Daphne, one process, before issue 13)."""
    try:
        from millrace import webserver
    except ImportError:
        return "daphne", 1
    return "platform", webserver.default_workers()


def server_command(server: str, app: str, port: int, workers: int) -> list[str]:
    py, host = sys.executable, "127.0.0.1"
    commands = {
        "platform": [py, "-m", "millrace.webserver", "--app", app,
                     "--bind", f"{host}:{port}", "--workers", str(workers)],
        "daphne": [py, "-m", "daphne", "-b", host, "-p", str(port), app],
        "uvicorn": [py, "-m", "uvicorn", "--host", host, "--port", str(port), "--workers",
                    str(workers), "--loop", "uvloop", "--http", "httptools",
                    "--no-access-log", "--log-level", "warning", "--lifespan", "off", app],
        "granian": [py, "-m", "granian", "--interface", "asginl", "--host", host, "--port",
                    str(port), "--workers", str(workers), "--loop", "uvloop",
                    "--log-level", "warning", app],
        "hypercorn": [py, "-m", "hypercorn", "-b", f"{host}:{port}", "-w", str(workers),
                      "-k", "uvloop", "--log-level", "warning", app],
    }
    return commands[server]


def wait_http(url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server for {url} exited with {proc.returncode}")
        with suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer")


@contextmanager
def floor_server(server: str, app: str, workers: int, path: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(server_command(server, app, port, workers), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}{path}", proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


@dataclass
class Platform:
    bootstrap: str
    registry: str
    proxy: str
    pid: int  # the platform's own process; its web workers are among its descendants


def web_workers(root_pid: int) -> list[int]:
    """The platform's web worker processes (`millrace.webserver --serve-fds`)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        with suppress(OSError):
            if b"--serve-fds" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time the processes have used so far."""
    total = 0
    for pid in pids:
        with suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


@contextmanager
def platform(data_dir: Path, root: Path = ROOT) -> Iterator[Platform]:
    """`manage.py platform` of the tree at `root` with its defaults, on free ports; the
    endpoints it printed."""
    env = {**os.environ, "MILLRACE_LOG_LEVEL": "WARNING", "PYTHONPATH": str(root)}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "platform", "--any-port", "--data-dir", str(data_dir)],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    try:
        printed = ""
        assert proc.stdout is not None
        for line in proc.stdout:
            printed += line
            if "Press Ctrl-C" in line:
                break
        found = {name: re.search(rf"{name}\s+(\S+)", printed)
                 for name in ("Kafka bootstrap", "Schema registry", "REST proxy")}
        if not all(found.values()):
            raise RuntimeError("the platform did not start:\n" + printed)
        bootstrap, registry, proxy = (m.group(1) for m in found.values() if m)
        yield Platform(bootstrap, registry, proxy, proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def export_tree(ref: str, into: Path) -> Path:
    """The tree of commit `ref`, unpacked under `into` (the virtualenv is this one's: the
    package is installed editable, and PYTHONPATH puts the export first)."""
    tree = into / "baseline"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


# --- wrk ---------------------------------------------------------------------------------

LUA_REPORT = """
done = function(summary, latency, requests)
  local records = 0
  for _, t in ipairs(threads) do records = records + (t:get("records") or 0) end
  io.write(string.format("RESULT %d %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout, latency:percentile(50), latency:percentile(99), records))
end
"""

LUA_THREADS = """
threads = {}
local next_id = 0
setup = function(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end
"""


def lua_string(text: str) -> str:
    """A quoted Lua literal (long brackets would turn CR LF into LF)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "\\r").replace("\n", "\\n") + '"'


def lua_fixed(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> str:
    table = ", ".join(f"[ {lua_string(k)} ] = {lua_string(v)}" for k, v in headers.items())
    return (f'request = function() return wrk.format({lua_string(method)}, {lua_string(path)}, '
            f"{{{table}}}, {lua_string(body.decode())}) end\n")


def lua_chunked(path: str, body: bytes) -> str:
    """A request sent with Transfer-Encoding: chunked (wrk.format would add Content-Length)."""
    head = (f"POST {path} HTTP/1.1\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n")
    return (f"local raw = {lua_string(head)} .. 'Host: ' .. wrk.host .. ':' .. wrk.port .. "
            f"'\\r\\n\\r\\n' .. {lua_string(body.decode())}\n"
            "request = function() return raw end\n")


@dataclass
class Result:
    requests_per_s: float
    records_per_s: float
    p50_ms: float
    p99_ms: float
    failed: int
    cpu_ms: float | None = None  # the web workers' CPU time per request (platform cases)


def run_wrk(url: str, script: str, seconds: float, connections: int, threads: int,
            records_per_request: int | None) -> Result:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write(LUA_THREADS + script + LUA_REPORT)
    try:
        out = subprocess.run(
            ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{max(1, round(seconds))}s",
             "--timeout", "10s", "-s", lua.name, url],
            capture_output=True, text=True, check=False,
        )
    finally:
        os.unlink(lua.name)
    match = re.search(r"RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)", out.stdout)
    if match is None:
        raise RuntimeError(f"wrk printed no result:\n{out.stdout}{out.stderr}")
    requests, duration_us, status, socket_errors, p50, p99, counted = map(int, match.groups())
    rate = requests / (duration_us / 1e6)
    per = rate * records_per_request if records_per_request else counted / (duration_us / 1e6)
    return Result(rate, per, p50 / 1000, p99 / 1000, status + socket_errors)


# --- the cases ---------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    url: str
    script: str
    records_per_request: int | None = 1  # None: counted from the responses
    connections: int | None = None  # None: --connections
    baseline: bool = False  # served by the baseline's platform
    workers: list[int] | None = None  # the platform's web worker pids


def registry_cases(base: str) -> list[Case]:
    httpx.put(f"{base}/config", json={"compatibility": "NONE"}).raise_for_status()
    schema = json.dumps({"type": "record", "name": "Bench",
                         "fields": [{"name": "a", "type": "int"}]})
    answer = httpx.post(f"{base}/subjects/bench-lookup/versions", json={"schema": schema})
    schema_id = answer.raise_for_status().json()["id"]
    headers = {"Content-Type": SR, "Accept": SR}
    schema_n = r'{"schema":"{\"type\":\"record\",\"name\":\"R%d_%d\",\"fields\":[]}"}'
    register = """
local n = 0
request = function()
  n = n + 1
  local body = string.format(SCHEMA, tid, n)
  return wrk.format("POST", "/subjects/bench-register-" .. tid .. "/versions", HEADERS, body)
end
"""
    lua_headers = "{" + ", ".join(f'["{k}"] = "{v}"' for k, v in headers.items()) + "}"
    register = register.replace("SCHEMA", lua_string(schema_n)).replace("HEADERS", lua_headers)
    return [
        Case("registry: schema by id", base,
             lua_fixed("GET", f"/schemas/ids/{schema_id}", {"Accept": SR})),
        Case("registry: lookup by schema", base,
             lua_fixed("POST", "/subjects/bench-lookup", headers,
                       json.dumps({"schema": schema}).encode())),
        Case("registry: register", base, register),
    ]


def new_topic(bootstrap: str, partitions: int = 4) -> str:
    """A topic of one replica per partition: the HTTP path's cost, not replication's (the
    platform's default min.insync.replicas of 2 would refuse it, so it is set to 1)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, 1, config={"min.insync.replicas": "1"})
    for future in admin.create_topics([topic]).values():
        future.result(30)
    return name


def fill_topic(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, PAYLOAD)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)


def produce_cases(base: str, bootstrap: str) -> list[Case]:
    """Each case produces to a topic of its own, so that what one case wrote (the log it
    grew, the batches the broker holds) is not another's history."""
    topics = [new_topic(bootstrap) for _ in range(4)]
    cluster_id = httpx.get(f"{base}/v3/clusters").json()["data"][0]["cluster_id"]
    v3 = [f"/v3/clusters/{cluster_id}/topics/{topic}/records" for topic in topics[2:]]
    binary = base64.b64encode(PAYLOAD).decode()
    as_json = json.dumps(PAYLOAD.decode()[:98])  # 100 bytes of JSON
    record = json.dumps({"value": {"type": "BINARY", "data": binary}}).encode()
    chunk = record * (STREAM // 10)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(10)) + b"0\r\n\r\n"
    return [
        Case("proxy: v2 produce binary x100", base, lua_fixed(
            "POST", f"/topics/{topics[0]}",
            {"Content-Type": "application/vnd.kafka.binary.v2+json"},
            json.dumps({"records": [{"value": binary}] * BATCH}).encode()), BATCH),
        Case("proxy: v2 produce json x100", base, lua_fixed(
            "POST", f"/topics/{topics[1]}", {"Content-Type": "application/vnd.kafka.json.v2+json"},
            ('{"records": [' + ",".join([f'{{"value": {as_json}}}'] * BATCH) + "]}").encode()),
            BATCH),
        Case("proxy: v3 produce one record", base,
             lua_fixed("POST", v3[0], {"Content-Type": "application/json"}, record)),
        Case("proxy: v3 streaming x1000", base, lua_chunked(v3[1], chunked), STREAM),
    ]


def consume_case(base: str, bootstrap: str, threads: int, seconds: float) -> Case:
    """One instance per wrk thread (and connection), each reading its own partition."""
    topic = new_topic(bootstrap, threads)
    # More than the case reads in `seconds` (both trees consume 130-150k records/s here): a
    # topic read to its end makes the last rounds wait out the 1 s fetch timeout.
    fill_topic(bootstrap, topic, int(250_000 * seconds))
    paths = []
    for partition in range(threads):
        created = httpx.post(f"{base}/consumers/bench-{topic}", headers={"Content-Type": V2},
                             json={"format": "binary", "auto.offset.reset": "earliest"})
        instance = created.raise_for_status().json()["base_uri"].split("/consumers/", 1)[1]
        path = f"/consumers/{instance}"
        partitions = {"partitions": [{"topic": topic, "partition": partition}]}
        for step in ("assignments", "positions/beginning"):
            httpx.post(f"{base}{path}/{step}", headers={"Content-Type": V2},
                       json=partitions).raise_for_status()
        paths.append(path)
    script = f"""
local paths = {{{", ".join(lua_string(p + "/records?timeout=1000") for p in paths)}}}
local counted = 0
request = function()
  return wrk.format("GET", paths[tid + 1], {{["Accept"] = "application/vnd.kafka.binary.v2+json"}})
end
response = function(status, headers, body)
  local _, n = body:gsub('"offset"', "")
  counted = counted + n
  records = counted
end
"""
    return Case("proxy: v2 consume", base, script, None, threads)


# --- the run -----------------------------------------------------------------------------

Key = tuple[str, bool]  # a case's name, and whether the baseline serves it


def measure(cases: list[Case], args: argparse.Namespace) -> dict[Key, Result]:
    """Every case `--rounds` times, the rounds interleaved; the medians of each.

    Interleaving spreads the machine's other load over every case alike, so that the
    ratios between cases hold even when the absolute figures drift. A case's baseline
    twin runs right before or after it, alternately.
    """
    rounds: dict[Key, list[Result]] = {(case.name, case.baseline): [] for case in cases}
    for case in cases:
        if case.records_per_request is not None:  # warm up (not consume: it would drain)
            run_case(case, args, 2)
    for n in range(args.rounds):
        for case in _round_order(cases, n):
            result = run_case(case, args, args.seconds)
            rounds[(case.name, case.baseline)].append(result)
            side = " (baseline)" if case.baseline else ""
            print(f"  round {n + 1} {case.name}{side}: {result.requests_per_s:,.0f} req/s, "
                  f"p99 {result.p99_ms:,.1f} ms", flush=True)
    return {key: _median(results) for key, results in rounds.items()}


def _median(results: list[Result]) -> Result:
    """The median round by rate, with the median of each round's latencies and CPU: a
    p99 is one slow moment, so the slowest round's neighbours say more than its own."""
    middle = len(results) // 2
    chosen = sorted(results, key=lambda r: r.requests_per_s)[middle]
    cpu = [r.cpu_ms for r in results if r.cpu_ms is not None]
    return Result(chosen.requests_per_s, chosen.records_per_s,
                  sorted(r.p50_ms for r in results)[middle],
                  sorted(r.p99_ms for r in results)[middle], chosen.failed,
                  sorted(cpu)[len(cpu) // 2] if cpu else None)


def _round_order(cases: list[Case], n: int) -> list[Case]:
    """Each case next to its baseline twin, the twin first in every other round."""
    ours = [c for c in cases if not c.baseline]
    twins = {c.name: c for c in cases if c.baseline}
    order: list[Case] = []
    for case in ours:
        pair = [case, twins[case.name]] if case.name in twins else [case]
        order += pair[::-1] if n % 2 else pair
    return order


def run_case(case: Case, args: argparse.Namespace, seconds: float) -> Result:
    """One wrk run; for a platform case also the CPU its web workers spent per request,
    which the machine's other load changes far less than the rates."""
    connections = case.connections or args.connections
    before = cpu_seconds(case.workers) if case.workers else 0.0
    result = run_wrk(case.url, case.script, seconds, connections,
                     min(args.threads, connections), case.records_per_request)
    if case.workers:
        requests = result.requests_per_s * max(1, round(seconds))
        result.cpu_ms = (cpu_seconds(case.workers) - before) * 1000 / max(requests, 1)
    return result


def main() -> None:
    server, workers = default_server()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--server", default=server,
                        choices=["platform", "daphne", "uvicorn", "granian", "hypercorn"],
                        help="the floors' server (default: the platform's)")
    parser.add_argument("--workers", type=int, default=workers)
    parser.add_argument("--floors-only", action="store_true")
    parser.add_argument("--only", action="append", default=[], metavar="TEXT",
                        help="run only the cases whose name contains TEXT (and the floors), "
                             "in the order the options are given")
    parser.add_argument("--baseline", metavar="REF",
                        help="also run every case on the platform of git commit REF")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: run `make bench` (it installs the Debian package)")
    print(f"floors: {args.server}, {args.workers} worker(s); {args.connections} connections, "
          f"{args.rounds} rounds of {args.seconds:.0f} s a case", flush=True)
    with ExitStack() as running:
        asgi = running.enter_context(
            floor_server(args.server, "bench.floor_asgi:app", args.workers, "/"))
        django = running.enter_context(
            floor_server(args.server, "bench.floor_django:application", args.workers, "/floor"))
        cases = [Case("floor: bare ASGI app", asgi, lua_fixed("GET", "/", {})),
                 Case("floor: bare Django async view", django, lua_fixed("GET", "/floor", {}))]
        if not args.floors_only:
            tmp = Path(running.enter_context(tempfile.TemporaryDirectory(prefix="http-bench-")))
            (tmp / "data").mkdir()
            cases += platform_cases(running.enter_context(platform(tmp / "data")), args)
            if args.baseline:
                tree = export_tree(args.baseline, tmp)
                (tmp / "baseline-data").mkdir()
                older = running.enter_context(platform(tmp / "baseline-data", tree))
                for case in platform_cases(older, args):
                    case.baseline = True
                    cases.append(case)
        print_table(measure(cases, args), args.baseline)


def platform_cases(p: Platform, args: argparse.Namespace) -> list[Case]:
    chosen = [c for c in registry_cases(p.registry) + produce_cases(p.proxy, p.bootstrap)
              if wanted(c.name, args.only)]
    if wanted("proxy: v2 consume", args.only):  # filling its topic takes a while
        chosen.append(consume_case(p.proxy, p.bootstrap, args.threads,
                                   args.seconds * args.rounds))
    if args.only:  # in the order of --only
        chosen.sort(key=lambda c: next(i for i, text in enumerate(args.only) if text in c.name))
    workers = web_workers(p.pid)
    for case in chosen:
        case.workers = workers
    return chosen


def wanted(name: str, only: list[str]) -> bool:
    return not only or any(text in name for text in only)


def print_table(results: dict[Key, Result], baseline: str | None) -> None:
    asgi = results[("floor: bare ASGI app", False)].requests_per_s
    django = results[("floor: bare Django async view", False)].requests_per_s
    if baseline:
        print_comparison(results, baseline, django)
        return
    print("\n| case | req/s | records/s | of ASGI floor | of Django floor | p50 ms | p99 ms "
          "| worker CPU ms/req | failed |\n|---|---|---|---|---|---|---|---|---|")
    for (name, _), r in results.items():
        print(f"| {name} | {r.requests_per_s:,.0f} | {r.records_per_s:,.0f} | "
              f"{r.requests_per_s / asgi:.1%} | {r.requests_per_s / django:.0%} | "
              f"{r.p50_ms:.2f} | {r.p99_ms:.2f} | {_cpu(r)} | {r.failed} |")


def _cpu(result: Result) -> str:
    return "" if result.cpu_ms is None else f"{result.cpu_ms:.3f}"


def print_comparison(results: dict[Key, Result], baseline: str, django: float) -> None:
    print(f"\nbaseline: {baseline}; worker CPU is the web workers' CPU time per request\n\n"
          "| case | baseline req/s | records/s | p50 / p99 ms | CPU ms/req "
          "| this req/s | records/s | p50 / p99 ms | CPU ms/req | of Django floor "
          "| rate this/base | p99 this/base | CPU this/base | failed |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, is_baseline), r in results.items():
        if is_baseline:
            continue
        b = results.get((name, True))
        before = (f"{b.requests_per_s:,.0f} | {b.records_per_s:,.0f} | "
                  f"{b.p50_ms:.1f} / {b.p99_ms:.1f} | {_cpu(b)}") if b else " | | | "
        ratios = " | | "
        if b and b.requests_per_s and b.p99_ms:
            cpu = (f"{r.cpu_ms / b.cpu_ms:.2f}" if r.cpu_ms is not None and b.cpu_ms
                   else "")
            ratios = (f"{r.requests_per_s / b.requests_per_s:.2f} | "
                      f"{r.p99_ms / b.p99_ms:.2f} | {cpu}")
        failed = r.failed + (b.failed if b else 0)
        print(f"| {name} | {before} | {r.requests_per_s:,.0f} | {r.records_per_s:,.0f} | "
              f"{r.p50_ms:.1f} / {r.p99_ms:.1f} | {_cpu(r)} | {r.requests_per_s / django:.0%} | "
              f"{ratios} | {failed} |")


if __name__ == "__main__":
    main()
