"""An I/O error in a log's files fails the log (Kafka's KafkaStorageException): that call
and every later one raise KafkaStorageError, and `on_failure` hears of it once."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokercore.log import KafkaStorageError, PartitionLog
from brokercore.protocol.errors import ErrorCode
from tests.brokercore.log.builders import make_batch
from tests.brokercore.log.conftest import OpenLog


def test_a_roll_that_cannot_create_its_segment_fails_the_log_once(
        open_log: OpenLog, log_dir: Path) -> None:
    log = open_log(segment_bytes=200)
    failures: list[tuple[PartitionLog, OSError]] = []
    log.on_failure = lambda failed, error: failures.append((failed, error))
    log.append_as_leader(make_batch([b"x" * 150]), leader_epoch=0)
    log_dir.rename(log_dir.with_name("orders-0.gone"))
    log_dir.write_text("a file where the partition directory was")

    with pytest.raises(KafkaStorageError) as raised:  # the next append rolls a segment
        log.append_as_leader(make_batch([b"y" * 150]), leader_epoch=0)

    assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert [(failed, type(error)) for failed, error in failures] == [(log, NotADirectoryError)]
    with pytest.raises(KafkaStorageError, match="offline"):
        log.read(0, 1 << 20)  # a read would still work; the log is offline all the same
    with pytest.raises(KafkaStorageError):
        log.assign_epoch(1, log.log_end_offset)
    assert len(failures) == 1
