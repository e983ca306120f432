"""The Spark session fixture is laganalysis's (one local[2] session per test process, with
millrace-kafka registered): the connector's tests and the lag jobs' share it. A module that
decodes or encodes through a schema registry starts one of its own (`schema_registry`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.laganalysis.conftest import spark

__all__ = ["schema_registry", "spark"]


@pytest.fixture(scope="module")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real registry server (the platform's web server over a SQLite file) for the module."""
    from tests.registry.live import registry_servers

    data = tmp_path_factory.mktemp("registry")
    with registry_servers(f"sqlite:///{data / 'registry.sqlite3'}", data) as (url,):
        yield url
