"""Exactly-once into Kafka across a crash: a Spark driver copying a topic is SIGKILLed in the
middle of a micro-batch (its JVM and Python workers with it) and restarted on its checkpoint;
a read_committed consumer then finds every source record in the output exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.sparkkafka.test_sink import consume
from tests.sparkkafka.topics import create_topic, produce

RECORDS = 1200  # three batches of 400: three chances per driver start to kill one mid-write
BATCH = 400
SOURCE_PARTITIONS = 8  # on local[2], a batch's 8 tasks run in waves: some done, some not


def batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.glob("[0-9]*")} if directory.is_dir() else set()


def start_driver(
    bootstrap: str, source: str, sink: str, checkpoint: Path, mode: str, log: Path
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.sparkkafka.pipe_query",
            bootstrap,
            source,
            sink,
            *[str(checkpoint), mode, str(BATCH)],
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the JVM and workers die with it
    )


def sink_end(admin: AdminClient, sink: str) -> int:
    """Records and markers in the sink, committed or not (read_uncommitted end offsets)."""
    request = {TopicPartition(sink, p): OffsetSpec.latest() for p in range(2)}
    futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_UNCOMMITTED)
    return sum(f.result().offset for f in futures.values())


def kill_while_writing(
    driver: subprocess.Popen[bytes], checkpoint: Path, admin: AdminClient, sink: str
) -> int | None:
    """SIGKILL the driver's process group while a planned batch (offsets written, no commit)
    has written part of its output; that batch's id, or None when the kill came too late."""
    deadline = time.monotonic() + 300  # a JVM start and a batch on a loaded machine
    seen: dict[int, int] = {}  # in-flight batch -> the sink's end when it was first seen
    while time.monotonic() < deadline:
        assert driver.poll() is None, "the driver ended before it was killed"
        in_flight = batch_ids(checkpoint / "offsets") - batch_ids(checkpoint / "commits")
        end = sink_end(admin, sink)
        for batch in in_flight:
            seen.setdefault(batch, end)
        if any(end > seen[batch] for batch in in_flight):
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
            left = batch_ids(checkpoint / "offsets") - batch_ids(checkpoint / "commits")
            return max(left) if left else None
        time.sleep(0.01)
    os.killpg(driver.pid, signal.SIGKILL)
    pytest.fail("the driver never wrote a batch")


@pytest.mark.slow  # two Spark drivers, each a JVM start
def test_a_killed_and_restarted_query_writes_every_record_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = create_topic(kafka_bootstrap, SOURCE_PARTITIONS)
    sink = create_topic(kafka_bootstrap, 2)
    records = [(i % SOURCE_PARTITIONS, None, str(i).encode(), None) for i in range(RECORDS)]
    produce(kafka_bootstrap, source, records)
    checkpoint, log = tmp_path / "ckpt", tmp_path / "driver.log"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    replayed = None
    for _ in range(3):  # a kill that lands just after the batch committed proves nothing
        driver = start_driver(kafka_bootstrap, source, sink, checkpoint, "forever", log)
        replayed = kill_while_writing(driver, checkpoint, admin, sink)
        if replayed is not None:
            break
    assert replayed is not None, "every kill came between batches"

    again = start_driver(kafka_bootstrap, source, sink, checkpoint, "available-now", log)
    assert again.wait(timeout=240) == 0, log.read_text()[-3000:]
    assert replayed in batch_ids(checkpoint / "commits")

    counts = Counter(m.value() for m in consume(kafka_bootstrap, sink, 2, RECORDS))
    assert set(counts) == {str(i).encode() for i in range(RECORDS)}
    assert set(counts.values()) == {1}
