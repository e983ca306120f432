"""Fixtures shared by every suite: real brokers as child processes, a Spark cluster."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from tests.brokerproc import BrokerProcess

# Hypothesis' per-example deadline is a timing assertion: on two cores shared with brokers and
# JVMs an example can take 10x its quiet time. Examples stay bounded by max_examples.
settings.register_profile("millrace", deadline=None)
settings.load_profile("millrace")

if TYPE_CHECKING:
    from tests.sparkcluster import SparkCluster


# The files that take a minute or more (`make test` prints the slowest tests), started first:
# two workers take files in collection order (--dist loadfile), so a long file collected
# last keeps one worker busy while the other has finished. Their own order is kept.
LONGEST_FIRST = (
    "controlcenter/test_analysis_celery.py", "sparkkafka/test_exactly_once.py",
    "docs/test_readme_commands.py", "controlcenter/test_analysis_browser.py",
    "millrace/test_platform.py", "laganalysis/test_run_cli.py",
    "controlcenter/test_cluster_browser.py", "millrace/test_platform_secure.py",
    "cluster/test_failover.py", "brokercluster/test_clean_stop.py",
    "connect/test_distributed.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0].removeprefix("tests/")
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: within a file, and among the rest, the order stays


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
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """One Spark standalone master and worker, started when a test first asks for it: two
    JVMs that take long to start on a loaded machine. Tests that count the master's
    applications count the ones that are new to them."""
    from tests.sparkcluster import spark_standalone

    with spark_standalone(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster
