"""`manage.py failover_demo`, run as a newcomer runs it, against real broker processes.

The command is a subprocess reading a cluster of `python -m brokercore` processes over
sockets; the leader it loses is killed with SIGKILL through the cluster supervisor.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from brokercluster.ports import free_port
from millrace.management.commands.failover_demo import PartitionState, compare, describe
from tests.brokerproc import REPO, ClusterProcess
from tests.cluster.faults import FAST_FAILOVER
from tests.compat.clients import new_topic

ACKED = re.compile(r"acked (\d+)")


class Demo:
    """The command as a child process, its output collected line by line as it comes."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        env = {**os.environ, "MILLRACE_DATA_DIR": str(tmp_path / "var"),
               "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "failover_demo", *args], cwd=REPO, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, what: str, matches: Callable[[str], bool],
                      timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((line for line in self.lines if matches(line)), None)
            if found is not None:
                return found
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"no line where {what}:\n{self.output}")

    def wait_for_acks(self, at_least: int) -> str:
        return self.wait_for_line(f"acked >= {at_least}", lambda line: acked(line) >= at_least)

    def finish(self, timeout: float = 90) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def acked(line: str) -> int:
    found = ACKED.search(line)
    return int(found.group(1)) if found and "sent" in line else -1


@pytest.fixture
def demos() -> Iterator[list[Demo]]:
    started: list[Demo] = []
    yield started
    for demo in started:
        demo.kill()


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return int(meta.topics[topic].partitions[partition].leader)


@pytest.mark.slow
def test_killing_a_leader_shows_leadership_move_and_loses_no_acknowledged_message(
    tmp_path: Path, demos: list[Demo],
) -> None:
    topic = new_topic("failover-demo")
    with ClusterProcess(tmp_path / "cluster", brokers=3, overrides=FAST_FAILOVER) as cluster:
        # --duration only bounds a hang; the newcomer's Ctrl-C ends the run.
        demo = Demo(tmp_path, "--bootstrap", cluster.bootstrap, "--topic", topic,
                    "--duration", "120")
        demos.append(demo)
        demo.wait_for_line("the topic is created", lambda line: line.startswith(
            f"Created topic {topic}: 3 partitions, replication factor 3, "
            "min.insync.replicas=2"))
        demo.wait_for_acks(200)

        victim = leader_of(cluster.bootstrap, topic, 0)
        cluster.kill(victim)
        moved = demo.wait_for_line(f"p0's leader moves off broker {victim}",
                                   lambda line: f"p0 leader {victim}\u2192" in line)
        demo.wait_for_acks(acked(moved) + 200)  # the producer carries on past the failover
        demo.proc.send_signal(signal.SIGINT)
        code = demo.finish()

    summary = demo.wait_for_line("the summary", lambda line: line.startswith("acknowledged"))
    assert re.fullmatch(r"acknowledged (\d+), read back \1, lost 0, duplicated 0", summary), \
        demo.output
    assert code == 0, demo.output


def test_a_single_broker_gets_rf_1_and_each_run_counts_only_its_own_messages(
    tmp_path: Path, demos: list[Demo],
) -> None:
    topic = new_topic("failover-demo")
    with ClusterProcess(tmp_path / "cluster", brokers=1) as cluster:
        args = ("--bootstrap", cluster.bootstrap, "--topic", topic, "--duration", "2")
        first = Demo(tmp_path, *args)
        demos.append(first)
        assert first.finish() == 0, first.output
        second = Demo(tmp_path, *args, "--rate", "50")
        demos.append(second)
        assert second.finish() == 0, second.output

    assert (f"Created topic {topic}: 3 partitions, replication factor 1, "
            "min.insync.replicas=1") in first.output
    assert f"Using the existing topic {topic}: 3 partitions" in second.output
    counts = [re.search(r"acknowledged (\d+), read back (\d+), lost 0, duplicated 0$",
                        demo.output, re.MULTILINE) for demo in (first, second)]
    assert all(counts), first.output + "\n" + second.output
    first_acked, second_acked = (int(c.group(1)) for c in counts if c)
    assert all(c.group(1) == c.group(2) for c in counts if c)
    assert 0 < second_acked < first_acked  # a quarter of the rate, and none of the first run


def test_an_unreachable_bootstrap_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "manage.py", "failover_demo", "--bootstrap", nobody, "--duration", "1"],
        cwd=REPO, env={**os.environ, "MILLRACE_DATA_DIR": str(tmp_path / "var")},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert f"cannot reach a broker at {nobody}" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_the_read_back_counts_losses_duplicates_and_unacknowledged_writes() -> None:
    report = compare({1, 2, 3, 4}, Counter({1: 1, 3: 3, 4: 1, 5: 1}))
    assert report.lost == [2]
    assert report.duplicated == 2
    assert report.unacknowledged_present == 1  # 5: written, its ack never came
    assert (report.acknowledged, report.read_back) == (4, 4)
    assert not report.clean
    assert compare({1, 2}, Counter({1: 1, 2: 1, 9: 1})).clean


def test_a_status_line_marks_what_moved_since_the_last_one() -> None:
    before = PartitionState(leader=2, isr=(1, 2, 3))
    assert describe(1, None, before) == "p1 leader 2 isr 1,2,3"
    assert describe(1, before, before) == "p1 leader 2 isr 1,2,3"
    assert (describe(1, before, PartitionState(leader=3, isr=(1, 3)))
            == "p1 leader 2\u21923 isr 1,2,3\u21921,3")
    assert (describe(0, before, PartitionState(leader=-1, isr=()))
            == "p0 leader 2\u2192none isr 1,2,3\u2192-")
