"""The Spark session fixture is laganalysis's (one local[2] session per test process, with
millrace-kafka registered): the connector's tests and the lag jobs' share it. A module that
decodes or encodes through a schema registry takes `schema_registry` (tests/conftest.py: one
per test process, shared with the streams tests)."""

from __future__ import annotations

from tests.laganalysis.conftest import spark

__all__ = ["spark"]
