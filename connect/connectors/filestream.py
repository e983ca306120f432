"""FileStreamSource and FileStreamSink, with Apache Kafka's class names and configs.

The source reads a file's lines into a topic, one record per line (a string value), with
the source partition `{"filename": <file>}` and the offset `{"position": <byte offset>}`
after the line, as Kafka's do, so offsets written by either worker mean the same. Without
`file` it reads standard input. The sink appends each record's value as one line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from itertools import accumulate, islice, repeat
from operator import attrgetter
from typing import IO, Any

from connect.api import (
    STRING_SCHEMA,
    ConnectException,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from connect.configdef import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    Importance,
    Type,
    at_least,
)
from connect.configdef import non_empty_string as non_empty

VERSION = "4.0.0"
_PLUS_ONE = (1).__add__  # a line's length with its \n, in C


def _single_topic(name: str, value: Any) -> None:
    non_empty(name, value)
    if value is not None and "," in str(value):
        raise ConfigException(f"'{name}' in FileStreamSourceConnector configuration requires "
                              "definition of a single topic")


class FileStreamSourceConnector(SourceConnector):
    kafka_class = "org.apache.kafka.connect.file.FileStreamSourceConnector"

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return (ConfigDef()
                .define("file", Type.STRING, None, Importance.HIGH,
                        "Source filename. If not specified, the standard input will be used")
                .define("topic", Type.STRING, NO_DEFAULT, Importance.HIGH,
                        "The topic to publish data to", validator=_single_topic)
                .define("batch.size", Type.INT, 2000, Importance.LOW,
                        "The maximum number of records the source task can read from the file "
                        "each time it is polled", validator=at_least(1)))

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self.config().parse(props)

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]  # one file, one reader

    def exactly_once_support(self, props: Mapping[str, str]) -> bool | None:
        return True  # offsets are byte positions: a restart resumes exactly there


class FileStreamSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.filename = props.get("file") or None
        self.topic = props["topic"]
        self.batch_size = int(props.get("batch.size", 2000))
        self.stream: IO[bytes] | None = None
        self.position = 0
        self.buffer = b""

    def _open(self) -> bool:
        if self.filename is None:
            self.stream = sys.stdin.buffer
            return True
        try:
            self.stream = open(self.filename, "rb")  # noqa: SIM115 - held until stop()
        except FileNotFoundError:
            return False  # as Kafka's: wait for the file to be created
        stored = self.context.offset_storage_reader.offset({"filename": self.filename})
        if stored is not None:
            self.position = int(stored["position"])
            self.stream.seek(self.position)
        return True

    def poll(self) -> list[SourceRecord] | None:
        if self.stream is None and not self._open():
            time.sleep(1)
            return None
        assert self.stream is not None
        self._check_still_there()
        # a batch's worth when the file has it (with exactly-once sources a batch is one
        # transaction, whose commit costs as much as many records)
        chunk = (self.stream.read(max(1 << 16, 200 * self.batch_size - len(self.buffer)))
                 if self.filename else self.stream.readline())
        if not chunk and b"\n" not in self.buffer:
            time.sleep(0.2)
            return None
        self.buffer += chunk
        *lines, rest = self.buffer.split(b"\n")
        if len(lines) > self.batch_size:  # the rest waits for the next poll
            rest = b"\n".join([*lines[self.batch_size:], rest])
            lines = lines[:self.batch_size]
        self.buffer = rest
        if not lines:
            return None
        return self._records(lines)

    def _records(self, lines: list[bytes]) -> list[SourceRecord]:
        """One record per line, built column by column: each line's end position is a
        running sum of the lines' lengths and the texts are decoded by `map`, so the Python
        work per line is the record and its offset dict (bench/README.md)."""
        ends = list(accumulate(map(_PLUS_ONE, map(len, lines)), initial=self.position))
        self.position = ends[-1]
        if any(map(bytes.endswith, lines, repeat(b"\r"))):  # Windows line ends
            lines = [line.rstrip(b"\r") for line in lines]
        texts = map(bytes.decode, lines, repeat("utf-8"), repeat("replace"))
        partition = {"filename": self.filename}
        offsets = [{"position": end} for end in islice(ends, 1, None)]  # after each line
        return list(map(SourceRecord, repeat(partition), offsets, repeat(self.topic), texts,
                        repeat(STRING_SCHEMA)))

    def _check_still_there(self) -> None:
        if self.filename is not None and not os.path.exists(self.filename):
            raise ConnectException(f"Source file {self.filename} vanished while it was being "
                                   "read")

    def stop(self) -> None:
        if self.stream is not None and self.filename is not None:
            self.stream.close()


class FileStreamSinkConnector(SinkConnector):
    kafka_class = "org.apache.kafka.connect.file.FileStreamSinkConnector"

    def version(self) -> str:
        return VERSION

    def config(self) -> ConfigDef:
        return ConfigDef().define("file", Type.STRING, None, Importance.HIGH,
                                  "Destination filename. If not specified, the standard output "
                                  "will be used")

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]


_VALUE = attrgetter("value")


def _line(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return json.dumps(value, default=str)


class FileStreamSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.filename = props.get("file") or None
        self.out: IO[str] = (open(self.filename, "a", encoding="utf-8")  # noqa: SIM115
                             if self.filename else sys.stdout)

    def put(self, records: list[SinkRecord]) -> None:
        if records:
            values = list(map(_VALUE, records))
            try:
                text = "\n".join(values)  # strings (StringConverter's): joined in C
            except TypeError:
                text = "\n".join(map(_line, values))
            self.out.write(text + "\n")
            self.out.flush()  # whoever tails the file sees each batch; fsync waits for flush()

    def flush(self, offsets: Mapping[tuple[str, int], int]) -> None:
        self.out.flush()
        if self.filename:
            os.fsync(self.out.fileno())

    def stop(self) -> None:
        if self.filename:
            self.out.close()
