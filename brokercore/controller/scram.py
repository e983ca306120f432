"""SCRAM credential decisions: the records that add, replace or remove users' credentials.

The broker's handler has already checked what needs no metadata (names, mechanisms,
iterations, a user named twice) and turned each salted password into the stored
credential; here a deletion of a credential that does not exist is refused, as in Kafka's
`ScramControlManager`. The records hold the credential as Kafka's do (salt, StoredKey,
ServerKey, iterations), never a password.

A cluster's first users come from `bootstrap.json` in the metadata log dir (written by
`python -m brokercore --add-scram`, like `kafka-storage format --add-scram`): the first
active controller of a new cluster writes its records together with the cluster id, and
never again after that.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from brokercore.protocol.errors import ErrorCode

from .image import MetadataImage
from .records import (
    MetadataRecord,
    RecordError,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    from_json,
    to_json,
)

log = logging.getLogger(__name__)

BOOTSTRAP_FILE = "bootstrap.json"

# (user, error code, message); code 0 for success
UserResult = tuple[str, int, str | None]


def scram_credential_records(
    image: MetadataImage, deletions: list[list[Any]], upsertions: list[dict[str, Any]]
) -> tuple[list[MetadataRecord], list[UserResult]]:
    """The records of the valid changes and every user's result."""
    records: list[MetadataRecord] = []
    results: list[UserResult] = []
    for name, mechanism in deletions:
        if mechanism not in image.scram_credentials.get(name, {}):
            results.append((name, ErrorCode.RESOURCE_NOT_FOUND,
                            "Attempt to delete a user credential that does not exist"))
            continue
        records.append(RemoveUserScramCredentialRecord(name, mechanism))
        results.append((name, ErrorCode.NONE, None))
    for upsertion in upsertions:
        records.append(UserScramCredentialRecord(**upsertion))
        results.append((upsertion["name"], ErrorCode.NONE, None))
    return records, results


def write_bootstrap(metadata_log_dir: Path, records: list[UserScramCredentialRecord]) -> Path:
    """Add `records` to the bootstrap file (a later one for the same user and mechanism
    replaces an earlier one)."""
    path = metadata_log_dir / BOOTSTRAP_FILE
    existing = {(r.name, r.mechanism): r for r in read_bootstrap(metadata_log_dir)
                if isinstance(r, UserScramCredentialRecord)}
    existing.update({(r.name, r.mechanism): r for r in records})
    metadata_log_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"records": [to_json(r) for r in existing.values()]}))
    tmp.chmod(0o600)
    tmp.replace(path)
    return path


def read_bootstrap(metadata_log_dir: Path) -> list[MetadataRecord]:
    path = metadata_log_dir / BOOTSTRAP_FILE
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text())
        return [from_json(item) for item in raw["records"]]
    except (OSError, ValueError, KeyError, TypeError, RecordError) as exc:
        log.error("cannot read the bootstrap records in %s: %s", path, exc)
        return []
