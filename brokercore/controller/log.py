"""The metadata log of a single-voter quorum, kept in a file of JSON lines.

On-disk format: `<log dir>/__cluster_metadata-0/metadata.jsonl`, one record per line, each
line `{"offset": N, "record": {...}}\n`, written and fsynced before the record is applied.
A line torn by a crash (no newline, or not JSON) is cut off when the log is opened.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from .image import Record

log = logging.getLogger(__name__)


class MetadataLog:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "metadata.jsonl"
        self.records: list[Record] = list(self._recover())
        self._file = open(self.path, "ab")  # noqa: SIM115  (held open for the broker's life)

    @property
    def end_offset(self) -> int:
        return len(self.records)

    def _recover(self) -> Iterator[Record]:
        if not self.path.exists():
            return
        good_bytes = 0
        with open(self.path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                try:
                    entry = json.loads(line)
                except ValueError:
                    break
                good_bytes += len(line)
                yield entry["record"]
        if good_bytes < self.path.stat().st_size:
            log.warning("truncating torn metadata log tail at byte %d of %s", good_bytes, self.path)
            os.truncate(self.path, good_bytes)

    def append(self, records: list[Record]) -> int:
        """Persist records durably; the offset of the first one."""
        first = self.end_offset
        lines = b"".join(
            json.dumps({"offset": first + i, "record": r}, separators=(",", ":")).encode() + b"\n"
            for i, r in enumerate(records)
        )
        self._file.write(lines)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.records.extend(records)
        return first

    def close(self) -> None:
        self._file.close()
