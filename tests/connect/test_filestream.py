"""The source path in process: FileStreamSourceTask's records and StringConverter's
batches (no sockets) are what Kafka's line-by-line reading and record-by-record conversion
give, and a source batch holding a record that cannot be converted (the session broker)
skips only that record under errors.tolerance=all."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from hypothesis import given, settings
from hypothesis import strategies as st

from connect.api import (
    STRING_SCHEMA,
    DataException,
    OffsetStorageReader,
    SourceRecord,
    SourceTaskContext,
)
from connect.connectors.filestream import FileStreamSourceTask
from connect.converters import build_converter
from connect.storage import partition_key
from connect.worker import SourceTaskRunner, TaskSetup

lines = st.lists(st.text(st.characters(exclude_characters="\n\r", codec="utf-8"), max_size=12)
                 | st.sampled_from(["", "\r", "é\r", "a\rb"]), max_size=40)


def _line_by_line(data: bytes) -> list[tuple[int, str]]:
    """Kafka's reading: each whole line, its \\r stripped, and the byte after its \\n."""
    out, position = [], 0
    for line in data.split(b"\n")[:-1]:
        position += len(line) + 1
        out.append((position, line.rstrip(b"\r").decode("utf-8", errors="replace")))
    return out


def _task(path: Path, batch_size: int) -> FileStreamSourceTask:
    task = FileStreamSourceTask()
    task.initialize(SourceTaskContext(OffsetStorageReader({})))
    task.start({"file": str(path), "topic": "t", "batch.size": str(batch_size)})
    return task


@settings(max_examples=60, deadline=None)
@given(lines, st.text(max_size=5), st.integers(1, 7))
def test_the_source_reads_each_line_once_with_the_position_after_it(
        tmp_path_factory: Any, texts: list[str], partial: str, batch_size: int) -> None:
    data = "".join(f"{t}\n" for t in texts).encode() + b"\xff" * bool(texts) + b"\n"
    path = tmp_path_factory.mktemp("src") / "in.txt"
    path.write_bytes(data + partial.replace("\n", "").encode())  # a line not ended yet
    task = _task(path, batch_size)
    seen: list[tuple[int, str]] = []
    while len(seen) < len(_line_by_line(data)):
        records = task.poll()
        assert records is not None and len(records) <= batch_size
        for record in records:
            assert record.source_partition == {"filename": str(path)}
            assert (record.topic, record.value_schema) == ("t", STRING_SCHEMA)
            seen.append((record.source_offset["position"], record.value))
    task.stop()
    assert seen == _line_by_line(data)


@given(st.lists(st.none() | st.text() | st.integers() | st.dictionaries(st.text(), st.text()),
                max_size=20))
def test_string_converter_batches_give_each_records_bytes(values: list[Any]) -> None:
    converter = build_converter({"value.converter": "StringConverter"}, "value.converter",
                                False)
    one_by_one = [converter.from_connect_data("t", None, v) for v in values]
    assert converter.from_connect_batch(["t"] * len(values), [None] * len(values),
                                        values) == one_by_one


class _Offsets:
    """The runner's offset store, empty: the test reads what it would write (`pending`)."""

    def of(self, connector: str) -> dict[str, Any]:
        return {}


def _runner(bootstrap: str, tolerance: str) -> SourceTaskRunner:
    key, value = (build_converter({"converter": "ByteArrayConverter"}, "converter", is_key)
                  for is_key in (True, False))
    config = {"file": "/nonexistent", "topic": "t", "errors.tolerance": tolerance}
    setup = TaskSetup("c", 0, config, config, FileStreamSourceTask, key, value,
                      {"bootstrap.servers": bootstrap}, lambda state, trace: None, "g", 60.0,
                      False)
    return SourceTaskRunner(setup, _Offsets(), lambda topic: None)  # type: ignore[arg-type]


def test_a_source_batch_with_a_record_that_fails_conversion_skips_only_that_record(
        kafka_bootstrap: str) -> None:
    topic = f"source-batch-{uuid.uuid4().hex[:8]}"
    partition = {"filename": "f"}
    records = [SourceRecord(partition, {"position": n}, topic,
                            "not bytes" if n == 2 else f"v{n}".encode()) for n in range(1, 5)]
    runner = _runner(kafka_bootstrap, "all")
    producer = runner._producer()
    runner._send(producer, records)
    assert producer.flush(30) == 0
    assert runner.pending == {partition_key(partition): (partition, {"position": 4})}
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 3 and time.monotonic() < deadline:
        values += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
    consumer.close()
    assert values == [b"v1", b"v3", b"v4"]
    strict = _runner(kafka_bootstrap, "none")
    with pytest.raises(DataException):
        strict._send(producer, records)
    producer.flush(30)
