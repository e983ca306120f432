"""One Spark session (local[2], small shuffles, no UI) on this venv's Python for every
laganalysis module that reads through it: a JVM start is seconds, and the modules only read
and compute, so they share it."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# py4j logs "Closing down clientserver connection" from __del__ after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from laganalysis.session import configure
    from sparkkafka.datasource import register

    session = configure(SparkSession.builder, "local[2]").getOrCreate()
    register(session)
    yield session
    session.stop()
