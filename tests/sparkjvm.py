"""JVM options for the short-lived Spark JVMs the tests start (the local session, stream
drivers, a web server's validation session): C1 only and the serial collector. A test's JVM
lives for seconds to minutes on a small input, so C2's compile threads and the parallel
collector's threads cost CPU (on two cores shared with the other worker) they never win
back; a JVM start and first query take about half the CPU time with these.

Given as JDK_JAVA_OPTIONS in the environment of the process that launches `java` (PySpark's
spark-submit, and the JVM it starts), so that nothing in the platform's code changes."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def jvm_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the test JVM options (appended to any JDK_JAVA_OPTIONS it has)."""
    options = " ".join(filter(None, [env.get("JDK_JAVA_OPTIONS", ""), JVM_OPTIONS]))
    return {**env, "JDK_JAVA_OPTIONS": options}


@contextmanager
def jvm_options() -> Iterator[None]:
    """This process's environment with the options while the block starts a JVM or a
    process that will (children copy the environment when they start); restored after, so
    that later children of this process are not affected."""
    before = os.environ.get("JDK_JAVA_OPTIONS")
    os.environ["JDK_JAVA_OPTIONS"] = jvm_env(os.environ)["JDK_JAVA_OPTIONS"]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("JDK_JAVA_OPTIONS", None)
        else:
            os.environ["JDK_JAVA_OPTIONS"] = before
