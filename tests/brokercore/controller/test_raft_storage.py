"""The quorum's durable state: term and vote, the entry log, truncation and torn tails."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokercore.controller.raft_snapshots import Snapshot
from brokercore.controller.raft_storage import Entry, FileRaftStorage, RaftStorageError


def _entries(term: int, *ns: int) -> list[Entry]:
    return [Entry(term, {"type": "test", "n": n}) for n in ns]


def test_it_reopens_with_the_term_vote_and_entries_it_saved(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.save_vote(4, 2)
    storage.append([Entry(3, {"type": "leader_change", "leader_id": 2}, control=True)])
    storage.append(_entries(4, 1, 2))
    storage.close()
    reopened = FileRaftStorage(tmp_path)
    assert (reopened.term, reopened.voted_for) == (4, 2)
    assert reopened.entries == [Entry(3, {"type": "leader_change", "leader_id": 2}, True),
                                *_entries(4, 1, 2)]


def test_a_fresh_directory_starts_at_term_zero_with_no_vote(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path / "new")
    assert (storage.term, storage.voted_for, storage.entries) == (0, None, [])


def test_truncation_survives_a_reopen_and_later_appends_follow_it(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, 0, 1, 2, 3))
    storage.truncate(2)
    storage.append(_entries(2, 9))
    storage.close()
    assert FileRaftStorage(tmp_path).entries == [*_entries(1, 0, 1), *_entries(2, 9)]


def test_a_torn_tail_is_cut_off_on_open(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, 0, 1))
    storage.close()
    with open(tmp_path / "raft.jsonl", "ab") as f:
        f.write(b'{"offset":2,"term":1,"control":false,"rec')
    reopened = FileRaftStorage(tmp_path)
    assert reopened.entries == _entries(1, 0, 1)
    reopened.append(_entries(1, 5))
    reopened.close()
    assert FileRaftStorage(tmp_path).entries == _entries(1, 0, 1, 5)


def test_a_line_out_of_offset_sequence_ends_the_log(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, 0))
    storage.close()
    with open(tmp_path / "raft.jsonl", "ab") as f:
        f.write(b'{"offset":7,"term":1,"control":false,"record":{}}\n')
    assert FileRaftStorage(tmp_path).entries == _entries(1, 0)


def test_a_vote_torn_before_its_rename_leaves_the_old_one(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.save_vote(3, 1)
    (tmp_path / "quorum-state.tmp").write_bytes(b'{"term": 9, "vot')
    assert (FileRaftStorage(tmp_path).term, FileRaftStorage(tmp_path).voted_for) == (3, 1)


def _snapshot(end_offset: int, term: int = 1) -> Snapshot:
    return Snapshot(end_offset, term, tuple({"type": "test", "n": n} for n in range(end_offset)))


def test_snapshots_drop_the_log_before_the_previous_one_and_survive_a_reopen(
        tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, *range(30)))
    storage.save_snapshot(_snapshot(10))
    assert storage.start_offset == 0  # one snapshot: the log is kept whole
    storage.save_snapshot(_snapshot(20))
    assert (storage.start_offset, storage.start_term) == (10, 1)
    assert storage.entries == _entries(1, *range(10, 30))
    storage.append(_entries(2, 99))
    storage.close()
    reopened = FileRaftStorage(tmp_path)
    assert reopened.snapshot == _snapshot(20)
    assert (reopened.start_offset, reopened.start_term) == (10, 1)
    assert reopened.entries == [*_entries(1, *range(10, 30)), *_entries(2, 99)]
    assert sorted(p.name for p in tmp_path.glob("*.checkpoint")) == [
        "00000000000000000010-0000000001.checkpoint",
        "00000000000000000020-0000000001.checkpoint"]


def test_a_torn_snapshot_is_ignored_and_the_previous_one_and_the_log_serve(
        tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, *range(30)))
    storage.save_snapshot(_snapshot(10))
    storage.save_snapshot(_snapshot(20))
    storage.close()
    latest = tmp_path / "00000000000000000020-0000000001.checkpoint"
    latest.write_bytes(latest.read_bytes()[:-40])  # torn: its last bytes never reached disk
    (tmp_path / "00000000000000000030-0000000001.checkpoint.part").write_bytes(b'{"end_off')
    reopened = FileRaftStorage(tmp_path)
    assert reopened.snapshot == _snapshot(10)
    assert reopened.start_offset == 10 and reopened.entries == _entries(1, *range(10, 30))
    assert not list(tmp_path.glob("*.part"))


def test_a_damaged_snapshot_byte_is_caught_by_its_checksum(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, *range(12)))
    storage.save_snapshot(_snapshot(10))
    storage.close()
    path = tmp_path / "00000000000000000010-0000000001.checkpoint"
    data = bytearray(path.read_bytes())
    data[60] ^= 0x01
    path.write_bytes(bytes(data))
    reopened = FileRaftStorage(tmp_path)
    assert reopened.snapshot is None and reopened.entries == _entries(1, *range(12))


def test_a_snapshot_past_the_log_replaces_it(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, 0, 1, 2))
    storage.save_snapshot(_snapshot(50, term=3))  # the leader's, far ahead of us
    assert (storage.start_offset, storage.start_term, storage.entries) == (50, 3, [])
    storage.append(_entries(3, 50))
    storage.close()
    reopened = FileRaftStorage(tmp_path)
    assert (reopened.start_offset, reopened.entries) == (50, _entries(3, 50))
    assert reopened.snapshot == _snapshot(50, term=3)


def test_a_log_that_no_readable_snapshot_covers_is_refused_not_dropped(tmp_path: Path) -> None:
    storage = FileRaftStorage(tmp_path)
    storage.append(_entries(1, *range(30)))
    storage.save_snapshot(_snapshot(10))
    storage.save_snapshot(_snapshot(20))
    storage.close()
    for path in tmp_path.glob("*.checkpoint"):
        path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(RaftStorageError, match="remove the directory"):
        FileRaftStorage(tmp_path)
