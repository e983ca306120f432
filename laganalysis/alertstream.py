"""The lag-anomaly stream: `_millrace-lag-samples` in, `_millrace-lag-alerts` rows out, by the
rolling-baseline rule of `laganalysis/lagbaseline.py`, as a Spark Structured Streaming frame.

Samples are grouped by (group, topic) and folded with `applyInPandasWithState`: each pair's
`Baseline` lives in Spark's state store (in the query's checkpoint), so a restarted query
goes on with the history it had, and the exactly-once sink makes each alert appear once. The
frame has the sink's `key` (`["group","topic"]`, as the other history topics) and `value`
(`records.LAG_ALERT_DDL` as JSON) columns. Executors import this module and lagbaseline.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from laganalysis import lagbaseline
from laganalysis.records import LAG_SAMPLE_DDL, SCHEMA_VERSION

OUTPUT_DDL = ("`group` STRING, topic STRING, ts LONG, state STRING, lag LONG, mean DOUBLE, "
              "stddev DOUBLE, threshold DOUBLE")
OUTPUT_COLUMNS = ("group", "topic", "ts", "state", "lag", "mean", "stddev", "threshold")


def judge_group(rule: lagbaseline.Rule) -> Any:
    """The function `applyInPandasWithState` calls per (group, topic) and micro-batch."""

    def apply(key: tuple[str, str], frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        baseline = (lagbaseline.Baseline.from_state(state.get) if state.exists
                    else lagbaseline.Baseline())
        samples = [(int(ts), int(lag)) for frame in frames
                   for ts, lag in zip(frame["ts"], frame["lag"], strict=True)]
        fed = lagbaseline.feed(baseline, samples, rule)
        state.update(fed.baseline.to_state())
        rows = [(key[0], key[1], a.judgement.ts, a.state, a.judgement.lag, a.judgement.mean,
                 a.judgement.stddev, a.judgement.threshold) for a in fed.alerts]
        if rows:  # most batches judge without an edge: nothing to emit
            yield pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))

    return apply


def alerts(samples: Any, rule: lagbaseline.Rule) -> Any:
    """`samples` is the millrace-kafka stream of `_millrace-lag-samples` (Spark's Kafka
    columns); the result, the alerts as the sink's `key` and `value` (append mode)."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    parsed = (samples.select(F.from_json(F.col("value").cast("string"), LAG_SAMPLE_DDL)
                             .alias("s")).select("s.*")
              .where((F.col("v") == SCHEMA_VERSION) & F.col("lag").isNotNull()
                     & F.col("ts").isNotNull()))
    judged = (parsed.select("group", "topic", "ts", "lag").groupBy("group", "topic")
              .applyInPandasWithState(judge_group(rule), OUTPUT_DDL, lagbaseline.STATE_DDL,
                                      "append", GroupStateTimeout.NoTimeout))
    return judged.select(
        F.to_json(F.array("group", "topic")).alias("key"),
        F.to_json(F.struct(F.lit(SCHEMA_VERSION).alias("v"),
                           *[F.col(f"`{c}`") for c in OUTPUT_COLUMNS])).alias("value"))
