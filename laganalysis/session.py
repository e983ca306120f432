"""The Spark settings every Millrace job runs with, on local[*] or a standalone cluster."""

from __future__ import annotations

from typing import Any

SETTINGS = {
    # Lag history is small per job; Spark's default of 200 shuffle partitions is overhead.
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    # laganalysis.run reports progress as JSON lines; the console bar would garble stdout.
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Arrow batches of up to 200,000 rows to and from Python workers instead of 10,000: fewer
    # round trips per task for the lag summary's numpy steps (bench/README.md).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def configure(builder: Any, master: str, app_name: str = "millrace-laganalysis") -> Any:
    """The builder with Millrace's settings; ``master`` is ``local[*]`` or ``spark://...``."""
    builder = builder.master(master).appName(app_name)
    for key, value in SETTINGS.items():
        builder = builder.config(key, value)
    return builder
