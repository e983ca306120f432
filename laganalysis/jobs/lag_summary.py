"""Lag summary per group/topic/partition over a window: offsets and seconds min/avg/p95/max, and
the seconds spent in each Burrow status (each sample holds until the next one).

Where the time goes (bench/README.md): each input task hands its rows to a Python worker as
Arrow, which splits them into one bucket per core by the key's CRC-32 (`split_by_key`); the
shuffle moves one Arrow blob per task and bucket (key indices and numbers, no strings, no
per-row serialization in the JVM); each reduce task turns its blobs into integer key ids and
reduces in numpy (`reduce_buckets`). The exact p95 is the interpolation Spark's
``percentile`` and numpy use."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from laganalysis.burrow import Status
from laganalysis.jobs.history import check_input, lag_samples
from laganalysis.jobs.result import JobResult, ParamError, Series, Table

KEY = ["group", "topic", "partition"]
STATUSES = [s.name for s in Status if s is not Status.NOTFOUND]
COLUMNS = (
    *KEY,
    "samples",
    *(f"lag_{m}" for m in ("min", "avg", "p95", "max")),
    *(f"lag_seconds_{m}" for m in ("min", "avg", "p95", "max")),
    *(f"seconds_{s}" for s in STATUSES),
)


def check(params: Mapping[str, Any]) -> None:
    check_input(params)
    _bucket(params)


def run(spark: SparkSession, params: Mapping[str, Any]) -> JobResult:
    bucket_s = _bucket(params)
    samples = lag_samples(spark, params)
    rows = [r.asDict() for r in summarize(samples).orderBy(*KEY).collect()]
    result = JobResult("lag_summary")
    result.tables["partitions"] = Table.of(COLUMNS, rows)
    result.charts["group_max_lag"] = _max_lag_chart(samples, bucket_s)
    return result


def _bucket(params: Mapping[str, Any]) -> int:
    try:
        bucket_s = int(params.get("bucket_s", 60))
    except (TypeError, ValueError) as exc:
        raise ParamError(f"bucket_s must be a whole number of seconds: {exc}") from exc
    if bucket_s < 1:
        raise ParamError(f"bucket_s must be at least 1, got {bucket_s}")
    return bucket_s


def summarize(samples: DataFrame) -> DataFrame:
    """One row per partition; the heavy part. Each input task splits its rows into buckets by
    partition key in numpy (`split_by_key`); the shuffle moves one Arrow blob per task and
    bucket, and each reduce task sums up whole keys in numpy (`reduce_buckets`)."""
    # The partition and the status cross to Python as one long: every column handed over as
    # Arrow costs the JVM per row, and this one saved 0.6-0.8 s of its CPU at 10M rows.
    narrow = samples.select("group", "topic", _partition_code().alias("pc"), *NUMBERS)
    # One bucket (one reduce task) per core, not the session's 8 shuffle partitions: at 1M rows
    # on local[2] that took 22.4 s against 26.2 s in the same run (bench/README.md).
    labels = bucket_labels(samples.sparkSession.sparkContext.defaultParallelism)
    return (
        narrow.mapInArrow(partial(split_by_key, labels), BUCKET_SCHEMA)
        .repartition(len(labels), "bucket")
        .mapInArrow(reduce_buckets, OUTPUT_SCHEMA)
    )


OUTPUT_SCHEMA = ", ".join([
    "`group` STRING, topic STRING, partition INT, samples LONG",
    "lag_min LONG, lag_avg DOUBLE, lag_p95 DOUBLE, lag_max LONG",
    "lag_seconds_min DOUBLE, lag_seconds_avg DOUBLE, lag_seconds_p95 DOUBLE",
    "lag_seconds_max DOUBLE",
    *(f"seconds_{s} DOUBLE" for s in STATUSES),
])
# One row per input task and bucket: the bucket's keys (group, topic, partition) and its rows
# (key index into those keys, ts, lag, lag_seconds, code), each an Arrow IPC stream.
BUCKET_SCHEMA = "bucket INT, keys BINARY, rows BINARY"
NUMBERS = ["ts", "lag", "lag_seconds"]
# The packed partition and status (`_partition_code`): the status code in the low 8 bits (255
# for none), a null partition's flag in bit 8, the partition above.
NO_STATUS, NULL_PARTITION = 255, 256


def bucket_labels(n: int) -> list[int]:
    """n bucket values that Spark's hash partitioning (``pmod(hash(v), n)``) sends to n
    different shuffle partitions: value i lands in partition i, so no two buckets share a task
    while another task idles."""
    found: dict[int, int] = {}
    value = 0
    while len(found) < n:
        found.setdefault(spark_hash_int(value) % n, value)
        value += 1
    return [found[i] for i in range(n)]


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash`` of an INT (Murmur3 x86 32-bit, seed 42), as a signed int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593 & mask
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & mask
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def split_by_key(labels: list[int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A task's rows to one row per bucket: every row of a key goes to the bucket of its key's
    CRC-32, so a key's rows from every task meet in one reduce task. Only numbers cross the
    shuffle: key indices into the bucket's small key table, time, lag, lag seconds, status."""
    received = [b for b in batches if b.num_rows]
    if not received:
        return
    table = pa.Table.from_batches(received)
    packed = table["pc"].to_numpy()
    part = packed >> 8  # the partition and its null flag: one integer per partition or null
    ids, firsts, _ = _key_ids(table, part)
    keys = table.select(["group", "topic"]).take(firsts).append_column(
        "partition", _partitions(part[firsts])
    )
    key_tuples = zip(*keys.to_pydict().values(), strict=True)
    key_bucket = np.array(
        [zlib.crc32(repr(k).encode()) % len(labels) for k in key_tuples], dtype=np.int64
    )
    bucket = key_bucket[ids]
    order = np.argsort(bucket.astype(np.int16), kind="stable")
    counts = np.bincount(bucket, minlength=len(labels))
    code = pa.array((packed & NO_STATUS).astype(np.int8))  # no status: 255 as int8 is -1
    values = table.select(NUMBERS).append_column("code", code).take(order)
    ids = ids[order]
    out: dict[str, list[Any]] = {"bucket": [], "keys": [], "rows": []}
    start = 0
    for j, count in enumerate(counts):
        if not count:
            continue
        mine = key_bucket == j
        local = np.cumsum(mine) - 1  # a key's index among this bucket's keys
        rows = values.slice(start, count).add_column(
            0, "key", pa.array(local[ids[start:start + count]].astype(np.int32))
        )
        start += count
        out["bucket"].append(labels[j])
        out["keys"].append(_ipc(keys.filter(pa.array(mine))))
        out["rows"].append(_ipc(rows))
    yield pa.RecordBatch.from_pydict(
        {"bucket": pa.array(out["bucket"], pa.int32()), "keys": pa.array(out["keys"], pa.binary()),
         "rows": pa.array(out["rows"], pa.binary())}
    )


def reduce_buckets(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """All of a reduce task's buckets (whole keys: every task sent a key's rows to the same
    bucket) to one summary row per key. The keys of each blob map to this task's key ids
    once, so the rows never carry strings."""
    key_ids: dict[tuple[Any, ...], int] = {}
    key_rows: list[tuple[Any, ...]] = []
    ids: list[Any] = []
    parts: list[pa.Table] = []
    for batch in batches:
        for keys_blob, rows_blob in zip(batch.column("keys"), batch.column("rows"), strict=True):
            keys = _read_ipc(keys_blob)
            mapping = []
            for key in zip(*keys.to_pydict().values(), strict=True):
                if key not in key_ids:
                    key_ids[key] = len(key_rows)
                    key_rows.append(key)
                mapping.append(key_ids[key])
            rows = _read_ipc(rows_blob)
            ids.append(np.array(mapping, dtype=np.int64)[rows["key"].to_numpy()])
            parts.append(rows.drop_columns(["key"]))
    if not parts:
        return
    table = pa.concat_tables(parts)
    n_keys = len(key_rows)
    dtype = np.int16 if n_keys < 2**15 else np.int64
    key_id = np.concatenate(ids).astype(dtype)
    group, topic, partition = zip(*key_rows, strict=True)
    yield pa.RecordBatch.from_pydict(
        {k: _nullable(v) for k, v in _summary(key_id, n_keys, table, {
            "group": pa.array(group, pa.string()), "topic": pa.array(topic, pa.string()),
            "partition": pa.array(partition, pa.int32())}).items()}
    )


def _summary(
    ids: Any, n_keys: int, table: pa.Table, keys: dict[str, Any]
) -> dict[str, Any]:
    """The summary columns of n_keys keys, given each row's key id."""
    samples = np.bincount(ids, minlength=n_keys).astype(np.int64)
    columns: dict[str, Any] = {**keys, "samples": samples}
    # The rows grouped by key, each key's in the order they came: one linear radix sort of
    # the key ids that the values and the times share.
    grouping = np.argsort(ids, kind="stable")
    for name in ("lag", "lag_seconds"):
        low, avg, p95, high = _value_stats(ids, n_keys, table[name], grouping)
        columns.update({f"{name}_min": _as_long(low) if name == "lag" else low,
                        f"{name}_avg": avg, f"{name}_p95": p95,
                        f"{name}_max": _as_long(high) if name == "lag" else high})
    held = _held_seconds(ids, n_keys, table, grouping)
    for i, status in enumerate(STATUSES):
        columns[f"seconds_{status}"] = held[:, i]
    return columns


def _ipc(table: pa.Table) -> bytes:
    """The table as an Arrow IPC stream, its buffers LZ4-compressed: the JVM copies each blob
    several times on its way through the shuffle (Arrow to row, Spark's own LZ4, disk, back to
    Arrow), and a bucket's numbers compress to a third (bench/README.md)."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="lz4" if pa.Codec.is_available("lz4") else None)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _read_ipc(blob: pa.BinaryScalar) -> pa.Table:
    return pa.ipc.open_stream(blob.as_buffer()).read_all()


def _partitions(part: Any) -> pa.Array:
    """The partitions (INT, or null) of `_partition_code`'s values shifted right by 8 bits."""
    return pa.array((part >> 1).astype(np.int32), mask=(part & 1).astype(bool))


def _key_ids(table: pa.Table, part: Any) -> tuple[Any, Any, int]:
    """Each row's key as a small integer, one row of each key, and how many keys; ``part``
    is one integer per partition (its null included)."""
    group = pc.dictionary_encode(table["group"], null_encoding="encode").combine_chunks()
    topic = pc.dictionary_encode(table["topic"], null_encoding="encode").combine_chunks()
    partition = part - int(part.min())
    combined = (group.indices.to_numpy().astype(np.int64) * (len(topic.dictionary) + 1)
                + topic.indices.to_numpy()) * (int(partition.max()) + 1) + partition
    if int(combined.min()) < 0 or int(combined.max()) > 4 * len(combined) + 2**16:
        _, firsts, ids = np.unique(combined, return_index=True, return_inverse=True)
        return ids.astype(np.int64), firsts, len(firsts)
    # The combined values are few and dense (groups x topics x partitions): a table over their
    # range numbers them in the same order as np.unique, without sorting every row.
    present = np.zeros(int(combined.max()) + 1, dtype=bool)
    present[combined] = True
    ids = (np.cumsum(present) - 1)[combined]
    firsts = np.empty(int(present.sum()), dtype=np.int64)
    firsts[ids] = np.arange(len(ids))  # any row of a key will do: they share the key
    return ids, firsts, len(firsts)


def _by_key(ids: Any, values: Any) -> Any:
    """The order that sorts rows by key, then by value (stable: ties keep their order)."""
    by_value = np.argsort(values, kind="stable")
    return by_value[np.argsort(ids[by_value], kind="stable")]


def _sorted_by_key(ids: Any, values: Any, counts: Any, grouping: Any) -> Any:
    """The values grouped by key (the order of the key ids), each key's sorted. With many rows
    per key, the rows are grouped by a linear radix sort of the key ids (``grouping``, or None
    to sort here) and each key's run is sorted in place, which takes a fifth of the time of
    one argsort of all values."""
    if len(counts) * 64 > len(values):  # few rows per key: a loop over keys would cost more
        return values[_by_key(ids, values)]
    if grouping is None:
        grouping = np.argsort(ids, kind="stable")
    grouped = values[grouping]
    ends = np.cumsum(counts)
    for start, end in zip((ends - counts).tolist(), ends.tolist(), strict=True):
        grouped[start:end].sort()
    return grouped


def _value_stats(
    ids: Any, n_keys: int, column: Any, grouping: Any
) -> tuple[Any, Any, Any, Any]:
    """min, avg, p95 and max per key over the non-null values (NaN where a key has none).
    p95 is Spark's exact percentile: ``lower + (pos - floor) * (upper - lower)`` at rank
    0.95 * (n - 1) of the sorted values, numpy's linear method too. ``grouping`` groups all
    rows by key; it holds for the values only when none is null."""
    values = column.to_numpy(zero_copy_only=False).astype(np.float64)
    present = ~np.isnan(values)
    if not present.all():
        ids, values, grouping = ids[present], values[present], None
    counts = np.bincount(ids, minlength=n_keys)
    none = counts == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.bincount(ids, weights=values, minlength=n_keys) / counts
    ordered = _sorted_by_key(ids, values, counts, grouping) if len(values) else np.zeros(1)
    starts = np.where(none, 0, np.concatenate(([0], np.cumsum(counts)[:-1])))
    pos = np.maximum(counts - 1, 0).astype(np.float64) * 0.95
    lo, hi = np.floor(pos), np.ceil(pos)
    lower, upper = ordered[starts + lo.astype(np.int64)], ordered[starts + hi.astype(np.int64)]
    p95 = np.where((hi == lo) | (lower == upper), lower, lower + (pos - lo) * (upper - lower))
    low, high = ordered[starts], ordered[np.where(none, 0, starts + counts - 1)]
    low, p95, high = (np.where(none, np.nan, a) for a in (low, p95, high))
    return low, avg, p95, high


def _held_seconds(ids: Any, n_keys: int, table: pa.Table, grouping: Any) -> Any:
    """Seconds in each status per key: each sample holds until its key's next one. When each
    key's rows came in time order (a history read in order: the usual case), ``grouping`` is
    already the order by key and time, and the stable sort by time is skipped."""
    ts = table["ts"].to_numpy(zero_copy_only=False).astype(np.float64)
    code = pc.fill_null(table["code"], -1).to_numpy().astype(np.int64)
    grouped_ids, grouped_ts = ids[grouping], ts[grouping]
    backwards = (grouped_ids[1:] == grouped_ids[:-1]) & ~(grouped_ts[1:] >= grouped_ts[:-1])
    if backwards.any():  # NaN times count as backwards: sorted as before
        order = _by_key(ids, ts)
        ids, ts, code = ids[order], ts[order], code[order]
    else:
        ids, ts, code = grouped_ids, grouped_ts, code[grouping]
    held = np.zeros(len(ts))
    held[:-1] = np.where(ids[1:] == ids[:-1], ts[1:] - ts[:-1], 0.0)
    held = np.nan_to_num(held, nan=0.0)
    known = code >= 0
    slots = ids[known].astype(np.int64) * len(STATUSES) + code[known]
    sums = np.bincount(slots, weights=held[known], minlength=n_keys * len(STATUSES))
    return sums.reshape(n_keys, len(STATUSES))


def _as_long(values: Any) -> pa.Array:
    return pa.array(np.nan_to_num(values).astype(np.int64), mask=np.isnan(values))


def _nullable(values: Any) -> Any:
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return pa.array(values, mask=np.isnan(values))
    return values


def _partition_code() -> Column:
    """The partition and the status code as one long (`NO_STATUS`, `NULL_PARTITION`)."""
    partition = F.coalesce(F.col("partition").cast("long") * 512, F.lit(NULL_PARTITION))
    return partition + F.coalesce(_status_code().cast("long"), F.lit(NO_STATUS))


def _status_code() -> Column:
    """The status as its index in STATUSES (null for any other), compared once per row."""
    code = F.lit(None).cast("byte")
    for i, name in reversed(list(enumerate(STATUSES))):
        code = F.when(F.col("status") == name, F.lit(i).cast("byte")).otherwise(code)
    return code


def _max_lag_chart(samples: DataFrame, bucket_s: int) -> Series:
    """Per group, the largest partition lag in each time bucket."""
    bucketed = samples.withColumn("bucket", F.floor(F.col("ts") / bucket_s) * bucket_s)
    per_group = (
        bucketed.groupBy("group", "bucket").agg(F.max("lag").alias("lag")).orderBy("bucket")
    ).collect()
    xs = sorted({int(r.bucket) for r in per_group})
    index = {x: i for i, x in enumerate(xs)}
    y: dict[str, list[float | None]] = {}
    for r in per_group:
        y.setdefault(r.group, [None] * len(xs))[index[int(r.bucket)]] = float(r.lag)
    return Series(xs, y)
