"""The high-watermark checkpoint of a log dir: ``replication-offset-checkpoint``.

Kafka's format: a version line (``0``), an entry-count line, then one
``<topic> <partition> <high watermark>`` line per partition. It is rewritten whole and
atomically (temp file, fsync, rename, fsync dir); topic names hold no spaces.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from brokercore.log.checkpoint import fsync_directory
from brokercore.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FILE = "replication-offset-checkpoint"
VERSION = 0


def write_high_watermarks(log_dir: Path, offsets: dict[TopicPartition, int]) -> None:
    path = log_dir / FILE
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(
        offsets.items(), key=lambda item: (item[0].topic, item[0].partition))]
    temporary = path.with_name(FILE + ".tmp")
    with temporary.open("w") as file:
        file.write("\n".join(lines) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_directory(log_dir)


def read_high_watermarks(log_dir: Path) -> dict[TopicPartition, int]:
    """The checkpointed high watermarks; none if the file is missing or unreadable (then
    each replica starts at 0 and learns its high watermark from the leader again)."""
    path = log_dir / FILE
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad header")
        offsets = {}
        for line in lines[2:]:
            topic, partition, offset = line.split(" ")
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    except (ValueError, IndexError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    return offsets
