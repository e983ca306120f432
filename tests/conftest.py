"""Fixtures shared by every suite: real brokers as child processes, a Spark cluster."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings
from xdist.scheduler import LoadFileScheduling

from tests import jvmarchive
from tests.brokerproc import BrokerProcess

# Every JVM the tests start (the local Spark session, stream drivers, the jobs Celery
# launches, a standalone master, its workers and executors) lives for seconds to minutes on a
# small input, and spends most of its CPU compiling: the client compiler alone (no C2) and the
# serial collector halve it (a JVM start and a first small query: 48-50 s of CPU, 24-26 s with
# these; an eta job through `laganalysis.run` 37 s, 19.5 s) and change no result. Set here in
# the environment, which every process a test starts inherits, and read by each `java`
# launcher (which names it on its stderr); the platform's own code does not change.
TEST_JVM_OPTIONS = jvmarchive.TEST_JVM_OPTIONS
# With the Spark classes' archive (`tests/jvmarchive.py`, made by `make test`), each JVM maps
# them instead of loading them: half a JVM start's CPU again. A JVM that cannot use it warns;
# the warnings go to stderr, where Spark logs, not to stdout, where `laganalysis.run` speaks.
_ARCHIVE = jvmarchive.archive_path(TEST_JVM_OPTIONS)
_ARCHIVE_OPTIONS = f"-XX:SharedArchiveFile={_ARCHIVE} -Xlog:disable " \
    "-Xlog:all=warning:stderr:uptime,level,tags"
if TEST_JVM_OPTIONS not in os.environ.get("JDK_JAVA_OPTIONS", ""):
    os.environ["JDK_JAVA_OPTIONS"] = " ".join(filter(None, [
        os.environ.get("JDK_JAVA_OPTIONS"), TEST_JVM_OPTIONS,
        _ARCHIVE_OPTIONS if _ARCHIVE.exists() else ""]))

# Hypothesis' per-example deadline is a timing assertion: on two cores shared with brokers and
# JVMs an example can take 10x its quiet time. Examples stay bounded by max_examples.
settings.register_profile("millrace", deadline=None)
settings.load_profile("millrace")

if TYPE_CHECKING:
    from tests.sparkcluster import SparkCluster


# How the two workers share the suite (`make test`: -n 2 --dist loadfile; tests/README.md).
# A work unit is a test file, except that the files on the local Spark session (a JVM started
# once per worker: the `spark` fixture) are one unit, so that only one worker pays that start.
# Units are handed out longest first (the longest-processing-time rule: what is left at the
# end is short, so the workers finish close together). The seconds are each unit's wall time
# in the last profiled run (MILLRACE_TEST_PROFILE, below), rounded; a unit not listed counts
# a second per test. Tests of these areas that never use the session (the streams page tests,
# the lag command run as a process) are in files of their own, outside the unit: they wait on
# JVMs of their own, and the other worker runs them meanwhile (tests/README.md). The seconds
# are from a quiet -n 2 rehearsal's profile (stop 28; the cluster-events file at its usual
# time, not the 131 s of the step it waited out there). Files whose waits were cut since
# (stop 29) have that figure times their serial after/before ratio (tests/README.md,
# "Files that mostly wait" and the stop 29 rows): the failover file 100 -> 80, the
# transactions file 50 -> 15, the secured platform 60 -> 50, the platform 65 -> 55.
SHARED_JVM = "shared-jvm"
SHARED_JVM_FILES = frozenset({
    "controlcenter/streams/test_streams.py", "laganalysis/test_jobs.py",
    "laganalysis/test_run_cli.py", "sparkkafka/test_batch_source.py",
    "sparkkafka/test_formats.py", "sparkkafka/test_sink.py", "sparkkafka/test_stream_source.py",
})
UNIT_SECONDS: dict[str, float] = {
    SHARED_JVM: 180, "cluster/test_failover.py": 80,
    "controlcenter/analysis/test_analysis_scenario.py": 85,
    "controlcenter/streams/test_streams_pages.py": 85,
    "controlcenter/pages/test_cluster_browser.py": 70, "millrace/test_platform.py": 55,
    "millrace/test_platform_secure.py": 50, "controlcenter/analysis/test_analysis_browser.py": 55,
    "compat/test_transactions_confluent.py": 15,
    "controlcenter/collector/test_collector_faults.py": 50, "brokercluster/test_clean_stop.py": 40,
    "brokercore/replication/test_big_topics.py": 30, "sparkkafka/test_exactly_once.py": 30,
    "cluster/test_cli.py": 30, "docs/test_readme_commands.py": 30,
    "millrace/test_failover_demo.py": 30, "brokercore/replication/test_cluster_replication.py": 27,
    "cluster/test_transactions_failover.py": 20,
    "controlcenter/pages/test_replication_browser.py": 25,
    "controlcenter/analysis/test_analysis_cluster_events.py": 25, "connect/test_mirror.py": 24,
    "controlcenter/pages/test_clusters.py": 24, "connect/test_registry_converters.py": 24,
    "compat/test_groups_consumer_protocol.py": 23,
    "controlcenter/collector/test_history_retention.py": 23,
    "brokercluster/test_quorum_faults.py": 20, "restproxy/test_schema_formats.py": 19,
    "controlcenter/pages/test_group_browser.py": 19,
}


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its file (as in the node id), or SHARED_JVM."""
    path = nodeid.split("::", 1)[0]
    return SHARED_JVM if path.removeprefix("tests/") in SHARED_JVM_FILES else path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    on_spark = {item.nodeid.split("::", 1)[0].removeprefix("tests/") for item in items
                if "spark" in getattr(item, "fixturenames", ())}
    if on_spark - SHARED_JVM_FILES:
        warnings.warn(f"on the Spark session but not in conftest.py's SHARED_JVM_FILES (a "
                      f"worker starts a JVM more): {sorted(on_spark - SHARED_JVM_FILES)}",
                      stacklevel=1)
    tests = Counter(unit_of(item.nodeid) for item in items)

    def longest_first(item: pytest.Item) -> tuple[float, str]:
        unit = unit_of(item.nodeid)
        return -UNIT_SECONDS.get(unit.removeprefix("tests/"), float(tests[unit])), unit

    items.sort(key=longest_first)  # stable: within a unit the order of its tests stays


class SharedJvmFileScheduling(LoadFileScheduling):  # type: ignore[misc]  # xdist is untyped
    """--dist loadfile with the SHARED_JVM files as one unit, and the units handed out in
    collection order, which pytest_collection_modifyitems made longest first (xdist would
    reorder them by their number of tests, which put the longest files, with one to three
    tests each, last). Not loadgroup: xdist names a test after its group by setting
    `item._nodeid`, which pytest 9 no longer reads, so every test became a unit of its own."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    # A worker that crashes (librdkafka can abort a process) is replaced, and pytest-xdist
    # 3.8's loadscope then hung the run until CI's limit: it put the dead worker's whole
    # workload back, finished units too, and an empty unit sent to a worker never completes
    # (pytest-xdist#1378), and it gave the replacement one unit where a worker holding a single
    # test waits for a second before it runs the first (#1327). The test it crashed in is
    # reported failed by xdist and is not run again; the rest of its unit runs next.
    def remove_node(self, node: Any) -> str | None:
        workload = self.assigned_work.pop(node)
        left = {scope: [nodeid for nodeid, done in unit.items() if not done]
                for scope, unit in workload.items()}
        left = {scope: nodeids for scope, nodeids in left.items() if nodeids}
        if not left:
            return None
        crashed: str = left[next(iter(left))].pop(0)
        for scope, nodeids in reversed(left.items()):
            if nodeids:
                self.workqueue[scope] = dict.fromkeys(nodeids, False)
                self.workqueue.move_to_end(scope, last=False)
        for other in self.assigned_work:
            self._reschedule(other)
        return crashed

    def schedule(self) -> None:
        if self.collection is None:
            super().schedule()
            return
        for node in self.nodes:  # a replacement worker: two units, as at the start
            self._reschedule(node)
            self._reschedule(node)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return SharedJvmFileScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


# Where the suite's time goes (tests/README.md, "How long it takes"): with
# MILLRACE_TEST_PROFILE=<dir>, each worker appends a line per test to <dir>/<worker>.jsonl
# with its wall seconds and the CPU seconds its process tree spent in it: the worker, the
# children it reaped, and the processes still running under it (a broker, a JVM, a platform
# and what they reaped). `python -m tests.profile_report <dir>` sums them per file.
PROFILE_DIR = os.environ.get("MILLRACE_TEST_PROFILE")
_TICKS = os.sysconf("SC_CLK_TCK")
PR_SET_CHILD_SUBREAPER = 36


def _tree_cpu_seconds() -> float:
    """CPU seconds of this process, the children it reaped and every live descendant with
    what each reaped (from /proc: utime, stime, cutime and cstime)."""
    times = os.times()
    total = times.user + times.system + times.children_user + times.children_system
    parent: dict[int, int] = {}
    spent: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue  # gone between the listing and the read
        pid = int(stat.parent.name)
        parent[pid] = int(fields[1])
        spent[pid] = sum(int(tick) for tick in fields[11:15]) / _TICKS
    descendants: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - descendants
        descendants |= frontier
    return total + sum(spent[pid] for pid in descendants)


if PROFILE_DIR:
    PROFILE_PATH = Path(PROFILE_DIR)
    # A process whose parent exits first (the JVM of a `laganalysis.run` job outlives its
    # Python by its own shutdown) would be adopted by init and its CPU lost to the count:
    # as the subreaper of its tree, this process adopts it instead, and it stays listed
    # (as a zombie, never reaped here) with its CPU seconds until pytest exits.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
        wall, cpu = time.monotonic(), _tree_cpu_seconds()
        yield
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        PROFILE_PATH.mkdir(parents=True, exist_ok=True)
        with open(PROFILE_PATH / f"{worker}.jsonl", "a") as log:
            log.write(json.dumps({"test": item.nodeid, "worker": worker,
                                  "wall": time.monotonic() - wall,
                                  "cpu": _tree_cpu_seconds() - cpu}) + "\n")


@pytest.fixture(autouse=True)
def _no_database_connection_from_an_earlier_test(request: pytest.FixtureRequest) -> None:
    """A test without database access starts with this thread's connections closed. A
    database test leaves its connection open, and Django's handler, driven in-process
    (over ASGI, not through the test client), checks an open connection when a request
    starts: the test would then fail or pass by which file ran before it on its worker."""
    if "django" not in sys.modules or request.node.get_closest_marker("django_db") or \
            {"db", "transactional_db"} & set(request.fixturenames):
        return
    try:  # Playwright's sync API runs a loop on this thread: Django refuses to close there
        asyncio.get_running_loop()
    except RuntimeError:
        from django.db import connections

        connections.close_all()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One built-in broker for the whole session; tests use their own topic names."""
    broker = BrokerProcess(tmp_path_factory.mktemp("session-broker")).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: BrokerProcess) -> str:
    """bootstrap.servers of the session broker: "127.0.0.1:PORT"."""
    return kafka_broker.bootstrap


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Private brokers for tests that stop, kill or reconfigure them."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, name: str = "broker") -> BrokerProcess:
        broker = BrokerProcess(tmp_path / name, overrides)
        started.append(broker)
        return broker.start()

    yield make
    for broker in started:
        broker.kill()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real registry server (the platform's web server over a SQLite file), started when a
    test first asks for it. Its users (`sparkkafka/`'s format tests, `controlcenter/streams/`)
    are files of the shared-JVM unit and register subjects named after their own topics, so
    one server serves them all: a start (a migration and a web server) instead of three."""
    from tests.registry.live import registry_servers

    data = tmp_path_factory.mktemp("registry")
    with registry_servers(f"sqlite:///{data / 'registry.sqlite3'}", data) as (url,):
        yield url


@pytest.fixture(scope="session")
def spark_cluster_starting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """One Spark standalone master and worker, started when a test first asks for it: two
    JVMs that take long to start on a loaded machine. Not yet up: a module that needs it
    later asks for this first, so that the JVMs start while it does other things."""
    from tests.sparkcluster import spark_standalone

    with spark_standalone(tmp_path_factory.mktemp("spark-cluster"), wait=False) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark_cluster(spark_cluster_starting: SparkCluster) -> SparkCluster:
    """The standalone cluster, up. Tests that count the master's applications count the
    ones that are new to them."""
    spark_cluster_starting.wait_up()
    return spark_cluster_starting
