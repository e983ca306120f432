"""The broker's log directories (`log.dirs`): each one's identity, health and partitions.

Each dir holds a `meta.properties` as a KRaft broker's does (`version=1`, `node.id`,
`directory.id`: a random Kafka `Uuid` in base64, KIP-858), written on the dir's first use and
checked on every start. A dir that cannot be created or read, or that belongs to another node,
is kept as offline (its error is reported by DescribeLogDirs as KAFKA_STORAGE_ERROR) instead
of stopping the broker. A partition's directory (`<topic>-<partition>`) lives in exactly one
dir; two dirs holding the same partition stop the broker (`DuplicateLogError`), as in Kafka.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
# `<topic>-<partition>`; topic names are [a-zA-Z0-9._-]. Metadata and deleted logs never match.
PARTITION_DIR = re.compile(r"^[a-zA-Z0-9._-]+-\d+$")
METADATA_LOG = "__cluster_metadata-0"


class DuplicateLogError(Exception):
    """The same partition was found in two log dirs: which one is current cannot be known."""


@dataclass
class LogDir:
    path: Path
    directory_id: str  # "" while offline before its identity could be read
    error: str | None = None  # why the dir is offline

    @property
    def online(self) -> bool:
        return self.error is None

    def partition_dirs(self) -> list[str]:
        """The names of the partition directories in this dir."""
        return sorted(p.name for p in self.path.iterdir()
                      if p.is_dir() and PARTITION_DIR.match(p.name) and p.name != METADATA_LOG)


def new_directory_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def open_log_dirs(paths: list[Path], node_id: int) -> list[LogDir]:
    return [open_log_dir(path, node_id) for path in dict.fromkeys(paths)]


def open_log_dir(path: Path, node_id: int) -> LogDir:
    """The dir with its identity, created on first use; offline if it cannot be used."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        meta = path / META_PROPERTIES
        if not meta.exists():
            _write_meta(meta, {"version": "1", "node.id": str(node_id),
                               "directory.id": new_directory_id()})
        props = _read_meta(meta)
        if props.get("node.id") != str(node_id):
            raise OSError(f"{meta} belongs to node {props.get('node.id')}, not {node_id}")
        LogDir(path, props["directory.id"]).partition_dirs()  # the dir can be listed
        return LogDir(path, props["directory.id"])
    except (OSError, KeyError) as exc:
        log.error("log dir %s is offline: %s", path, exc)
        return LogDir(path, "", error=str(exc))


def locate_partitions(dirs: list[LogDir]) -> dict[str, LogDir]:
    """Each partition directory name found in the online dirs, with the dir holding it."""
    found: dict[str, LogDir] = {}
    for log_dir in dirs:
        if not log_dir.online:
            continue
        for name in log_dir.partition_dirs():
            if name in found:
                raise DuplicateLogError(
                    f"partition {name} is in two log dirs, {found[name].path} and "
                    f"{log_dir.path}; remove the stale copy before starting the broker")
            found[name] = log_dir
    return found


def delete_strays(found: dict[str, LogDir]) -> None:
    """Partition directories found at startup that no assigned replica took: their topics
    were deleted while this broker was down."""
    for name, log_dir in found.items():
        path = log_dir.path / name
        log.info("deleting stray log directory %s", path)
        shutil.rmtree(path, ignore_errors=True)


def _read_meta(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def _write_meta(path: Path, props: dict[str, str]) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as out:
        out.writelines(f"{key}={value}\n" for key, value in props.items())
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
