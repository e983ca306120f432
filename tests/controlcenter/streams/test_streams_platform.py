"""Issue 21's "done when", as a user meets it: a windowed aggregation started through the
control center of a running `manage.py platform`, a broker SIGKILLed, then the whole platform
SIGKILLed and started again on the same data dir and ports, and the exact counts in the
output topic afterwards (read_committed), the query resumed by the restarted platform itself.

In `make faults` only: a platform start is a minute or more here, and the test makes two, plus
two driver JVMs and the web process's Spark session.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokercluster.ports import free_base_port, free_port
from tests.brokerproc import REPO
from tests.controlcenter.streams.test_streams import wait_until as streams_wait_until

pytestmark = [pytest.mark.faults, pytest.mark.slow]

WAIT_S = 900  # JVM starts on a machine shared with other runs
BASE_MS = (int(time.time()) // 10 - 12) * 10_000  # as in test_streams: windows 2 minutes ago
SQL = """
SELECT window.start AS window_start, CAST(key AS STRING) AS k, count(*) AS n
FROM {view} WATERMARK timestamp DELAY OF INTERVAL 5 SECONDS
GROUP BY window(timestamp, '10 seconds'), CAST(key AS STRING)"""


class Platform:
    """`manage.py platform` on fixed ports (a restart must find its cluster where it was), in
    its own process group so that it can be killed whole."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.ports = {"--kafka-port": free_base_port(3), "--web-port": free_port(),
                      "--registry-port": free_port(), "--restproxy-port": free_port(),
                      "--connect-port": free_port()}
        self.metrics_port = free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    @property
    def web(self) -> str:
        return f"http://127.0.0.1:{self.ports['--web-port']}/"

    @property
    def bootstrap(self) -> str:
        base = self.ports["--kafka-port"]
        return ",".join(f"127.0.0.1:{base + i}" for i in range(3))

    def start(self) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS",
                                                                "DATABASE_URL")}
        env["MILLRACE_COLLECTOR_METRICS_PORT"] = str(self.metrics_port)
        env["MILLRACE_DATA_DIR"] = str(self.data_dir)
        args = [a for pair in self.ports.items() for a in (pair[0], str(pair[1]))]
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "platform", "--data-dir", str(self.data_dir), *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        assert self.proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Press Ctrl-C to stop." in line:
                self.output = lines
                return "".join(lines)
        raise AssertionError("the platform did not start:\n" + "".join(lines[-40:]))

    def kill(self) -> None:
        """SIGKILL to the platform and every process of its group; its other children die
        with their parents (PR_SET_PDEATHSIG), the stream drivers too."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        wait_until(lambda: not _listening(self.ports["--kafka-port"])
                   and not _listening(self.ports["--web-port"]), "the platform gone", 120)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_until(check: Callable[[], Any], what: str, seconds: float = WAIT_S) -> Any:
    """The streams module's wait, with this module's longer default (a whole platform)."""
    return streams_wait_until(check, what, seconds)


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[Platform]:
    running = Platform(tmp_path / "data")
    try:
        yield running
    finally:
        running.stop()


def produce(bootstrap: str, topic: str, window_s: int, counts: dict[str, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    ts = BASE_MS + window_s * 1000
    for key, n in counts.items():
        for i in range(n):
            producer.produce(topic, f"{key}-{i}".encode(), key.encode(), partition=i % 2,
                             timestamp=ts + i)
    assert producer.flush(60) == 0


def counts_in(bootstrap: str, topic: str) -> dict[tuple[int, str], int]:
    """{(window start - BASE_MS in s, key): n} of every committed row; none written twice."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    rows: list[tuple[str, dict[str, Any]]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            break
        rows.append(((message.key() or b"").decode(), json.loads(message.value())))
    consumer.close()
    written = Counter((k, r["window_start"]) for k, r in rows)
    assert max(written.values(), default=1) == 1, f"a window written twice: {rows}"
    got = {}
    for key, row in rows:
        start = datetime.fromisoformat(row["window_start"].replace("Z", "+00:00"))
        got[(round(start.timestamp() * 1000 - BASE_MS) // 1000, key)] = row["n"]
    return got


@pytest.mark.timeout(3600)
def test_a_windowed_count_is_exact_after_a_broker_and_the_whole_platform_are_killed(
    platform: Platform
) -> None:
    text = platform.start()
    password = re.search(r"password (\S+)  \(shown only this once\)", text)
    assert password, text
    auth = ("admin", password.group(1))
    admin = AdminClient({"bootstrap.servers": platform.bootstrap})
    source, output = f"clicks-{uuid.uuid4().hex[:6]}", f"counts-{uuid.uuid4().hex[:6]}"
    for topic, partitions in ((source, 2), (output, 1)):
        admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(60)
    produce(platform.bootstrap, source, 0, {"a": 5, "b": 3})
    produce(platform.bootstrap, source, 10, {"a": 2})

    created = httpx.post(f"{platform.web}api/v1/streams/queries", auth=auth, timeout=WAIT_S,
                         json={"name": "counts", "sql": SQL.format(view=source.replace("-", "_")),
                               "output_topic": output, "key_column": "k"})
    assert created.status_code == 202, created.text
    url = f"{platform.web}api/v1/streams/queries/counts"

    def running(after: str = "") -> dict[str, Any] | None:
        try:
            query = httpx.get(url, auth=auth, timeout=60).json()
        except httpx.HTTPError:
            return None
        assert query["state"] != "FAILED", query["last_error"]
        ok = (query["state"] == "RUNNING" and query["progress"]
              and (query["started_at"] or "") > after)
        return query if ok else None

    first = wait_until(running, "the query running")

    # A broker dies; the query goes on with the other two.
    subprocess.run([sys.executable, "-m", "brokercluster", "kill", "2", "--data-dir",
                    str(platform.data_dir / "cluster")], cwd=REPO, check=True, timeout=120)
    produce(platform.bootstrap, source, 10, {"c": 4})
    before = wait_until(lambda: (q := running()) and q["progress"][-1]["batch_id"]
                        > first["progress"][-1]["batch_id"] and q,
                        "a batch after the broker's death")

    # The whole platform dies at once, and starts again on its data dir.
    platform.kill()
    platform.start()
    # Nobody asks: the restarted platform's supervisor resumes the query on its checkpoint.
    resumed = wait_until(lambda: running(after=before["started_at"]), "the query resumed")
    # Resumed, not counted as a crash (a crash before, say a Python worker that could not
    # connect back on a loaded machine, is the supervisor's ordinary restart).
    assert resumed["restarts"] == before["restarts"]

    produce(platform.bootstrap, source, 20, {"b": 6})
    produce(platform.bootstrap, source, 100, {"z": 1})  # the watermark moves on
    expected = {(0, "a"): 5, (0, "b"): 3, (10, "a"): 2, (10, "c"): 4, (20, "b"): 6}
    found = wait_until(lambda: (c := counts_in(platform.bootstrap, output))
                       and len(c) >= len(expected) and c, "every closed window")
    assert found == expected
