"""The Spark jobs on crafted histories, checked against values computed here by hand."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from laganalysis.burrow import Status
from laganalysis.jobs import CHECKS, JOBS, ParamError
from laganalysis.jobs.history import lag_samples
from laganalysis.jobs.lag_summary import bucket_labels, summarize
from laganalysis.records import ClusterEvent, EventKind, LagSample
from tests.laganalysis.history import (
    T0,
    catching_up_group,
    draining_group,
    jumping_group,
    seasonal_group,
    write_events,
    write_samples,
)
from tests.securebroker import start_secured_broker


def gini(values: list[float]) -> float:
    n, total = len(values), sum(values)
    return sum(abs(a - b) for a in values for b in values) / (2 * n * total)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("history")
    samples = [
        *catching_up_group(),
        *draining_group(),
        *seasonal_group(14, 5),
        *jumping_group(),
    ]
    events = [
        ClusterEvent(EventKind.REBALANCE, (T0 + 290) * 1000, group="g4"),
        ClusterEvent(EventKind.BROKER_DOWN, (T0 + 100) * 1000, broker=2),
        ClusterEvent(EventKind.LEADER_CHANGE, (T0 + 395) * 1000, topic="t", partition=1, broker=1),
    ]
    return {
        "samples_path": write_samples(root / "samples.jsonl", samples),
        "events_path": write_events(root / "events.jsonl", events),
        "samples": samples,
    }


def run(spark: Any, job: str, history: dict[str, Any], **params: Any) -> dict[str, Any]:
    paths = {k: history[k] for k in ("samples_path", "events_path")}
    result: dict[str, Any] = JOBS[job](spark, {**paths, **params}).to_json()
    return result


def rows(result: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return list(result["tables"][table]["rows"])


def test_lag_summary_gives_min_avg_p95_max_and_time_in_each_status(
    spark: Any, history: dict[str, Any]
) -> None:
    result = run(spark, "lag_summary", history, groups=["g1"])
    by_partition = {r["partition"]: r for r in rows(result, "partitions")}
    lags = [3000 - 50 * i for i in range(60)]
    p0 = by_partition[0]
    assert (p0["samples"], p0["lag_min"], p0["lag_max"]) == (60, 50, 3000)
    assert math.isclose(p0["lag_avg"], sum(lags) / 60)
    assert math.isclose(p0["lag_p95"], float(np.percentile(lags, 95)))
    assert math.isclose(p0["lag_seconds_max"], 300.0)
    assert (p0["seconds_OK"], p0["seconds_WARN"]) == (590.0, 0.0)
    p1 = by_partition[1]
    assert (p1["seconds_WARN"], p1["seconds_OK"], p1["seconds_STOP"]) == (300.0, 290.0, 0.0)
    chart = result["charts"]["group_max_lag"]
    assert chart["x"] == [T0 + 60 * m for m in range(10)]
    assert chart["y"]["g1"][0] == 3000.0


@pytest.mark.parametrize("input_tasks", [None, 5])
def test_lag_summary_matches_an_independent_numpy_computation(
    spark: Any, tmp_path: Path, input_tasks: int | None
) -> None:
    """Random histories, rows in random order, random statuses, one partition without any lag
    seconds: every figure as numpy computes it (p95 is numpy's linear percentile). With
    input_tasks, the rows are dealt round-robin to that many input tasks first, so every key's
    rows come from several tasks and meet in the shuffle."""
    rng = np.random.default_rng(21)
    statuses = [s for s in Status if s is not Status.NOTFOUND]
    samples: list[LagSample] = []
    for p in range(6):
        n = int(rng.integers(1, 400))
        times = np.sort(rng.choice(np.arange(T0 * 1000, (T0 + 86400) * 1000), n, replace=False))
        for ts, lag, st in zip(
            times, rng.integers(0, 50_000, n), rng.integers(0, len(statuses), n), strict=True
        ):
            seconds = None if p == 5 else float(lag) / 7.3
            samples.append(
                LagSample("gr", "t", p, int(ts), 0, int(lag), int(lag), seconds, statuses[st])
            )
    order = rng.permutation(len(samples))
    path = write_samples(tmp_path / "random.jsonl", [samples[i] for i in order])
    if input_tasks is None:
        result = JOBS["lag_summary"](spark, {"samples_path": path}).to_json()
        got = {r["partition"]: r for r in rows(result, "partitions")}
    else:
        spread = lag_samples(spark, {"samples_path": path}).repartition(input_tasks)
        assert spread.rdd.getNumPartitions() == input_tasks
        got = {r["partition"]: r.asDict() for r in summarize(spread).collect()}
    assert sorted(got) == list(range(6))
    for p, row in got.items():
        mine = sorted((s for s in samples if s.partition == p), key=lambda s: s.timestamp_ms)
        ts = np.array([s.timestamp_ms / 1000 for s in mine])
        held = np.append(np.diff(ts), 0.0)
        expected: dict[str, Any] = {"samples": len(mine)}
        for name, values in (
            ("lag", [float(s.lag) for s in mine]),
            ("lag_seconds", [s.lag_seconds for s in mine if s.lag_seconds is not None]),
        ):
            for m, f in (("min", np.min), ("avg", np.mean), ("max", np.max)):
                expected[f"{name}_{m}"] = float(f(values)) if values else None
            expected[f"{name}_p95"] = float(np.percentile(values, 95)) if values else None
        for st in statuses:
            chosen = [h for h, s in zip(held, mine, strict=True) if s.status is st]
            expected[f"seconds_{st.name}"] = float(sum(chosen))
        for column, want in expected.items():
            if want is None or isinstance(want, int):
                assert row[column] == want, (p, column)
            else:
                assert math.isclose(row[column], want, rel_tol=1e-9, abs_tol=1e-6), (p, column)


def test_lag_summary_keeps_a_null_group_or_partition_as_a_key_of_its_own() -> None:
    """The two numpy steps the Spark tasks run, in process: rows in batches of two, a null
    group and a null partition (a record missing them) each summarized as their own key."""
    import pyarrow as pa

    from laganalysis.jobs.lag_summary import reduce_buckets, split_by_key

    # The partition and status code packed as Spark hands them over (partition * 512 + code;
    # 256 + code for a null partition).
    table = pa.table({
        "group": pa.array(["a", None, "a", None, "b"]),
        "topic": pa.array(["t"] * 5),
        "pc": pa.array([0, 1, 0, 1, 256 + 2], pa.int64()),
        "ts": [1.0, 2.0, 3.0, 4.0, 5.0],
        "lag": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "lag_seconds": [0.1, None, 0.3, 0.4, 0.5],
    })
    (buckets,) = split_by_key(bucket_labels(2), iter(table.to_batches(max_chunksize=2)))
    got = {}
    for i in range(buckets.num_rows):  # each bucket as its own reduce task would get it
        for batch in reduce_buckets(iter([buckets.slice(i, 1)])):
            got.update({(r["group"], r["partition"]): r for r in batch.to_pylist()})
    assert sorted(got, key=repr) == sorted([("a", 0), (None, 0), ("b", None)], key=repr)
    assert (got[("a", 0)]["samples"], got[("a", 0)]["lag_max"]) == (2, 3)
    assert got[("a", 0)]["seconds_OK"] == 2.0
    assert (got[(None, 0)]["samples"], got[(None, 0)]["lag_seconds_avg"]) == (2, 0.4)
    assert got[("b", None)]["lag_min"] == 5


def test_lag_summary_keeps_partition_and_status_apart_through_spark(spark: Any) -> None:
    """The partition and the status cross from the JVM packed in one number: a null
    partition, a negative one and partition 0 stay three keys, and a status Burrow does not
    know (or none) holds no seconds in any status column."""
    schema = "`group` STRING, topic STRING, partition INT, ts DOUBLE, lag LONG, " \
        "lag_seconds DOUBLE, status STRING"
    df = spark.createDataFrame([
        ("g", "t", 0, 1.0, 10, 1.0, "OK"), ("g", "t", 0, 3.0, 30, 3.0, "WARN"),
        ("g", "t", 0, 4.0, 40, 4.0, "OK"),
        ("g", "t", None, 1.0, 5, 0.5, "STOP"), ("g", "t", None, 6.0, 7, 0.7, None),
        ("g", "t", -3, 2.0, 8, 0.8, "BOGUS"), ("g", "t", -3, 5.0, 9, 0.9, "ERR"),
    ], schema)
    got = {r["partition"]: r.asDict() for r in summarize(df).collect()}
    assert sorted(got, key=repr) == sorted([0, None, -3], key=repr)
    assert (got[0]["samples"], got[0]["seconds_OK"], got[0]["seconds_WARN"]) == (3, 2.0, 1.0)
    assert (got[None]["samples"], got[None]["lag_max"], got[None]["seconds_STOP"]) == (2, 7, 5.0)
    assert (got[-3]["samples"], got[-3]["lag_min"]) == (2, 8)
    assert sum(v for k, v in got[-3].items() if k.startswith("seconds_")) == 0.0


def test_lag_summary_buckets_land_in_distinct_shuffle_partitions(spark: Any) -> None:
    """The bucket values the lag summary shuffles by are sent by Spark's own hash partitioning
    to as many different partitions as there are buckets."""
    from pyspark.sql import functions as F

    for n in (1, 2, 8, 200):
        labels = bucket_labels(n)
        df = spark.createDataFrame([(v,) for v in labels], "v INT")
        got = [r[0] for r in df.select(F.pmod(F.hash("v"), F.lit(n))).collect()]
        assert got == list(range(n)), n


def test_eta_per_partition_and_group_with_skew(spark: Any, history: dict[str, Any]) -> None:
    result = run(spark, "eta", history, groups=["g1", "g2"])
    parts = {(r["group"], r["partition"]): r for r in rows(result, "partitions")}
    assert parts[("g1", 0)]["consume_rate"] == 15.0 and parts[("g1", 0)]["produce_rate"] == 10.0
    assert parts[("g1", 0)]["lag"] == 50 and parts[("g1", 0)]["eta_seconds"] == 10.0
    assert parts[("g1", 1)]["progress"] == "never" and parts[("g1", 1)]["eta_seconds"] is None
    assert parts[("g1", 2)]["progress"] == "caught_up"
    groups = {r["group"]: r for r in rows(result, "groups")}
    g1_lags = [50.0, 500.0 + 2 * 590, 0.0]
    assert groups["g1"]["progress"] == "never" and groups["g1"]["slowest_partition"] == 1
    assert math.isclose(groups["g1"]["skew_max_over_mean"], max(g1_lags) / (sum(g1_lags) / 3))
    assert math.isclose(groups["g1"]["skew_gini"], gini(g1_lags))
    # g2: p0 has 1000 left draining at 2/s (500 s), p1 200 at 1/s (200 s): the group is p0's.
    assert groups["g2"]["eta_seconds"] == 500.0 and groups["g2"]["slowest_partition"] == 0
    assert groups["g2"]["total_lag"] == 1200
    chart = result["charts"]["lag_by_partition"]  # the run page draws a bar per partition
    assert dict(zip(chart["x"], chart["y"]["lag"], strict=True)) == {
        f"{g} t-{p}": float(r["lag"]) for (g, p), r in parts.items()}


def test_sla_counts_breach_minutes_and_the_budget_left(spark: Any, history: dict[str, Any]) -> None:
    result = run(
        spark,
        "sla",
        history,
        groups=["g1", "g2"],
        since=T0,
        until=T0 + 600,
        thresholds={"g1": 200},
        threshold_s=50,
        objective=0.9,
    )
    worst: dict[tuple[str, int], float] = {}
    for s in history["samples"]:
        if s.group in ("g1", "g2") and T0 * 1000 <= s.timestamp_ms < (T0 + 600) * 1000:
            minute = (s.group, s.timestamp_ms // 60_000)
            worst[minute] = max(worst.get(minute, 0.0), s.lag_seconds or 0.0)
    expected = {
        g: sum(1 for (grp, _), w in worst.items() if grp == g and w > limit)
        for g, limit in (("g1", 200.0), ("g2", 50.0))
    }
    groups = {r["group"]: r for r in rows(result, "groups")}
    assert expected == {"g1": 4, "g2": 2}
    for g in ("g1", "g2"):
        assert groups[g]["breach_minutes"] == expected[g]
        assert math.isclose(groups[g]["window_minutes"], 10.0)
        assert math.isclose(groups[g]["budget_minutes"], 1.0)
        assert math.isclose(groups[g]["budget_left_minutes"], 1.0 - expected[g])
    assert groups["g1"]["threshold_s"] == 200.0 and groups["g2"]["threshold_s"] == 50.0


def test_anomalies_flag_only_the_hour_far_above_its_season(
    spark: Any, history: dict[str, Any]
) -> None:
    result = run(spark, "anomalies", history, groups=["g3"])
    flagged = rows(result, "anomalies")
    assert [r["hour"] for r in flagged] == [T0 + 14 * 86400 + 5 * 3600]
    assert flagged[0]["lag"] == 10_000 and flagged[0]["baseline"] == 100.5


def test_lag_jumps_are_matched_to_the_events_before_them(
    spark: Any, history: dict[str, Any]
) -> None:
    result = run(spark, "correlation", history, groups=["g4"], min_jump=400)
    jumps = [(r["ts"], r["jump"], r["event_kind"]) for r in rows(result, "jumps")]
    assert jumps == [(T0 + 300.0, 900, "rebalance"), (T0 + 400.0, 500, None)]
    kinds = {r["event_kind"]: r["jumps"] for r in rows(result, "by_event_kind")}
    assert kinds == {"rebalance": 1, "unexplained": 1}
    assert result["charts"]["jumps_by_event_kind"] == {
        "x": ["rebalance", "unexplained"], "y": {"jumps": [1.0, 1.0]}}


def test_an_empty_window_gives_empty_results_not_an_error(
    spark: Any, history: dict[str, Any]
) -> None:
    for job in ("lag_summary", "eta", "sla", "anomalies", "correlation"):
        result = run(spark, job, history, since=1, until=2)
        assert all(t["rows"] == [] for t in result["tables"].values()), job
        assert result["charts"], f"{job} has no chart for its run page"


@pytest.mark.parametrize(
    ("job", "params", "message"),
    [
        ("lag_summary", {"since": 10, "until": 5}, "since"),
        ("sla", {"objective": 1.5}, "objective"),
        ("sla", {"thresholds": {"g": -1}}, "positive"),
        ("hot_partitions", {"bootstrap": "x"}, "topics"),
        ("lag_summary", {"samples_path": None, "events_path": None}, "bootstrap"),
        ("lag_summary", {"bucket_s": 0}, "bucket_s"),
        ("eta", {"groups": "g1"}, "groups"),
        ("anomalies", {"z": -1}, "z"),
        ("correlation", {"within_s": "soon"}, "within_s"),
    ],
)
def test_impossible_parameters_are_refused(
    spark: Any, history: dict[str, Any], job: str, params: dict[str, Any], message: str
) -> None:
    """By the job in Spark, and by its check before any Spark session (laganalysis.run)."""
    paths = {k: history[k] for k in ("samples_path", "events_path")}
    with pytest.raises(ParamError, match=message):
        CHECKS[job]({**paths, **params})
    with pytest.raises(ParamError, match=message):
        run(spark, job, history, **params)


def test_hot_partitions_and_key_skew_from_topic_data(spark: Any, kafka_bootstrap: str) -> None:
    topic = f"hot-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    sent: list[tuple[int, bytes]] = [(0, b"hot")] * 300
    sent += [(i % 4, f"k{i}".encode()) for i in range(1, 9) for _ in range(25)]
    for partition, key in sent:
        producer.produce(topic, b"v" * 10, key, partition=partition)
    assert producer.flush(30) == 0
    result = JOBS["hot_partitions"](spark, {"bootstrap": kafka_bootstrap, "topics": [topic]})
    out = result.to_json()
    messages = [sum(1 for p, _ in sent if p == q) for q in range(4)]
    size = [sum(len(k) + 10 for p, k in sent if p == q) for q in range(4)]
    parts = rows(out, "partitions")
    assert [r["messages"] for r in parts] == messages == [350, 50, 50, 50]
    assert [r["bytes"] for r in parts] == size
    assert [r["hot"] for r in parts] == [True, False, False, False]
    keys = rows(out, "keys")
    assert (keys[0]["key"], keys[0]["messages"]) == ("hot", 300)
    assert math.isclose(keys[0]["share"], 300 / 500)
    (t,) = rows(out, "topics")
    assert t["distinct_keys"] == 9 and math.isclose(t["top_key_share"], 0.6)
    assert math.isclose(t["partition_gini"], gini([float(m) for m in messages]))
    assert math.isclose(t["partition_max_over_mean"], 350 / 125)


def test_partitions_without_records_count_toward_skew(spark: Any, kafka_bootstrap: str) -> None:
    """All traffic to 1 of 10 partitions: the nine empty ones come from the topic's metadata,
    so the one is hot and the skew is the worst a 10-partition topic can have."""
    topic = f"hot-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 10, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    for i in range(200):
        producer.produce(topic, b"v", f"k{i}".encode(), partition=3)
    assert producer.flush(30) == 0
    result = JOBS["hot_partitions"](spark, {"bootstrap": kafka_bootstrap, "topics": [topic]})
    out = result.to_json()
    parts = rows(out, "partitions")
    assert [(r["partition"], r["messages"]) for r in parts] == [
        (p, 200 if p == 3 else 0) for p in range(10)
    ]
    assert [r["hot"] for r in parts] == [p == 3 for p in range(10)]
    assert [r["share"] for r in parts] == [1.0 if p == 3 else 0.0 for p in range(10)]
    (t,) = rows(out, "topics")
    assert t["partitions"] == 10
    assert math.isclose(t["partition_max_over_mean"], 10.0)
    assert math.isclose(t["partition_gini"], gini([200.0] + [0.0] * 9))


def test_history_round_trips_through_the_samples_topic(
    spark: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The jobs read _millrace-lag-samples over Kafka exactly as they read files."""
    from laganalysis.records import LAG_SAMPLES_TOPIC, encode_lag_sample

    samples: list[LagSample] = [s for s in draining_group() if s.group == "g2"]
    tag = f"g2-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for s in samples:
        key, value = encode_lag_sample(
            LagSample(
                tag,
                *[
                    getattr(s, f)
                    for f in (
                        "topic",
                        "partition",
                        "timestamp_ms",
                        "committed_offset",
                        "end_offset",
                        "lag",
                        "lag_seconds",
                        "status",
                    )
                ],
            )
        )
        producer.produce(LAG_SAMPLES_TOPIC, value, key)
    assert producer.flush(30) == 0
    result = JOBS["eta"](spark, {"bootstrap": kafka_bootstrap, "groups": [tag]}).to_json()
    (group,) = rows(result, "groups")
    assert group["eta_seconds"] == 500.0 and group["total_lag"] == 1200


def test_a_job_reads_a_secured_cluster_with_the_platforms_kafka_config(
        spark: Any, tmp_path: Path) -> None:
    """`kafka_config` (the platform's KAFKA_CLIENT_CONFIG under `platform --secure`) logs
    the job's Kafka source in over SASL_SSL."""
    broker = start_secured_broker(tmp_path / "broker")
    try:
        login = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                 "sasl.username": "alice", "sasl.password": "alice-secret",
                 "ssl.ca.location": broker.ca_file}
        secured = broker.bootstrap("SASL_SSL")
        topic = f"secured-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": secured, **login})
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        producer = Producer({"bootstrap.servers": secured, **login})
        for i in range(10):
            producer.produce(topic, b"v", f"k{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        params = {"bootstrap": secured, "topics": [topic]}
        out = JOBS["hot_partitions"](spark, {**params, "kafka_config": login}).to_json()
        assert [r["messages"] for r in rows(out, "partitions")] == [5, 5]
    finally:
        broker.process.stop()
