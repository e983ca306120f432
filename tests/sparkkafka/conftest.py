"""The Spark session fixture is laganalysis's (one local[2] session per test process, with
millrace-kafka registered): the connector's tests and the lag jobs' share it."""

from tests.laganalysis.conftest import spark

__all__ = ["spark"]
