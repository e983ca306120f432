"""FileStreamSourceTask's records and StringConverter's batches, in process (no sockets):
what the source path makes a poll's records from, column by column, is what Kafka's
line-by-line reading gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from connect.api import STRING_SCHEMA, OffsetStorageReader, SourceTaskContext
from connect.connectors.filestream import FileStreamSourceTask
from connect.converters import build_converter

lines = st.lists(st.text(st.characters(blacklist_characters="\n\r"), max_size=12)
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
