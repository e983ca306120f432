"""Small text checkpoint files, written atomically (temp file, fsync, rename, fsync dir).

Format, as Kafka's checkpoint files: a version line (``0``), an entry-count line, then
one line per entry of space-separated integers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from brokercore.log.errors import CorruptLogError

VERSION = 0


def write_checkpoint(path: Path, entries: Sequence[tuple[int, ...]]) -> None:
    lines = [str(VERSION), str(len(entries))] + [" ".join(map(str, entry)) for entry in entries]
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w") as file:
        file.write("\n".join(lines) + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def read_checkpoint(path: Path) -> list[tuple[int, ...]] | None:
    """The entries, or None if the file does not exist."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    try:
        if int(lines[0]) != VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad header")
        return [tuple(int(part) for part in line.split()) for line in lines[2:]]
    except (ValueError, IndexError) as exc:
        raise CorruptLogError(f"unreadable checkpoint {path}: {exc}") from exc


def read_offset(path: Path, default: int) -> int:
    """A single-offset checkpoint (log start, recovery point, cleaner position)."""
    entries = read_checkpoint(path)
    return entries[0][0] if entries else default


def write_offset(path: Path, offset: int) -> None:
    write_checkpoint(path, [(offset,)])


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
