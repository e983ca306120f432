"""A real Celery worker for analysis tests, and a lag scenario on the built-in cluster.

`celery_worker(...)` starts `celery -A controlcenter worker` (and `beat`) as subprocesses
over this test session's database, consuming a queue of its own (so no other worker on the
same Redis takes its tasks) on the filesystem transport or on Redis; tests send to it by
overriding the same settings the platform uses.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.conf import settings
from django.db import connection
from django.test.utils import override_settings

from controlcenter.models import AnalysisRun
from laganalysis.burrow import Status
from laganalysis.records import LAG_SAMPLES_TOPIC, LagSample, encode_lag_sample
from tests.brokerproc import REPO


@contextmanager
def celery_worker(log_dir: Path, bootstrap: str, broker_url: str = "filesystem://",
                  master: str = "local[2]", queue: str | None = None, beat: bool = False,
                  concurrency: int = 1, wait: bool = True
                  ) -> Iterator[Callable[[], None]]:  # fmt: skip
    """A worker process on its own queue; while it runs, this process queues to it. With
    `beat`, `celery beat` runs too, looking for due schedules every second; the two start
    at once. `concurrency` is how many jobs it runs at once (the platform's
    MILLRACE_ANALYSIS_CONCURRENCY).

    The block gets a function that returns once every process is ready: with `wait=False`
    the block starts while they start (their imports overlap what it does meanwhile) and
    calls it before it needs them; a task queued earlier waits in the queue.

    A live server forked earlier queues to the settings' queue: pass `queue` to serve that
    one (and `purge_queue` it before the test queues anything)."""
    options = {} if broker_url != "filesystem://" else _file_queue_options()
    queue = queue or f"analytics-test-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ, "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "CELERY_BROKER_URL": broker_url,
        "SPARK_MASTER_URL": master, "MILLRACE_ANALYSIS_QUEUE": queue,
        "MILLRACE_SCHEDULE_CHECK_S": "1", "PYSPARK_PYTHON": sys.executable}  # fmt: skip
    worker = ["worker", "--pool", "threads", "--concurrency", str(concurrency), "--queues", queue,
              "--hostname", f"{queue}@%h", "--without-gossip", "--without-mingle"]
    procs = [_CeleryProcess(worker, env, log_dir / f"worker-{queue}.log", " ready.")]
    if beat:
        procs.append(_CeleryProcess(["beat", "--schedule", str(log_dir / f"beat-{queue}.db")], env,
                             log_dir / f"beat-{queue}.log", "beat: Starting"))

    def ready() -> None:
        for proc in procs:
            proc.wait_ready()

    try:
        if wait:
            ready()
        with override_settings(CELERY_BROKER_URL=broker_url, MILLRACE_ANALYSIS_QUEUE=queue,
                               CELERY_BROKER_TRANSPORT_OPTIONS=options,
                               KAFKA_BOOTSTRAP_SERVERS=bootstrap):
            yield ready
    except BaseException:
        for proc in procs:
            proc.show_log()  # shown with the failure
        raise
    finally:
        _stop(procs)


class _CeleryProcess:
    """`celery -A millrace ARGS`, started at once, its log in `log_path`."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path, ready: str) -> None:
        self.name, self.log_path, self.ready = args[0], log_path, ready
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "millrace", *args, "--loglevel", "INFO"],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.deadline = time.monotonic() + 90

    def wait_ready(self) -> None:
        while self.ready not in self.log_path.read_text(errors="replace"):
            assert self.proc.poll() is None, self.log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < self.deadline, f"celery {self.name} did not get ready"
            time.sleep(0.1)

    def show_log(self) -> None:
        print(f"--- celery {self.name}'s log ({self.log_path}) ---")
        print(self.log_path.read_text(errors="replace")[-6000:])

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)


@contextmanager
def _celery(args: list[str], env: dict[str, str], log_path: Path, ready: str
            ) -> Iterator[None]:  # fmt: skip
    """`celery -A millrace ARGS`, ready, until the block ends; its log is shown on a
    failure (the streams tests' worker, restarted by them)."""
    proc = _CeleryProcess(args, env, log_path, ready)
    try:
        proc.wait_ready()
        yield
    except BaseException:
        proc.show_log()
        raise
    finally:
        _stop([proc])


def _stop(procs: list[_CeleryProcess]) -> None:
    """Warm shutdown of them all at once (the worker and any job it runs); a process still
    there after 5 s gets a cold one, then SIGKILL."""
    for proc in procs:
        proc.signal(signal.SIGTERM)
    # The threads pool's warm shutdown can take 20 s with nothing to finish; a cold one stops
    # it now (a job it ran dies with it: PR_SET_PDEATHSIG).
    for grace, then in ((5.0, signal.SIGQUIT), (30.0, signal.SIGKILL)):
        _wait_all(procs, grace)
        for proc in procs:
            if proc.proc.poll() is None:
                proc.signal(then)
    _wait_all(procs, 10.0)


def _wait_all(procs: list[_CeleryProcess], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.proc.wait(max(0.0, deadline - time.monotonic()))


def _file_queue_options() -> dict[str, str]:
    """The filesystem transport's folders, as the worker's settings make them (not the
    current settings': inside another worker's block on Redis they are empty)."""
    folder = settings.CELERY_QUEUE_DIR
    return {"data_folder_in": str(folder), "data_folder_out": str(folder),
            "control_folder": str(folder / "control")}


def purge_queue(queue: str) -> None:
    """Drop what earlier test runs left in a filesystem-transport queue."""
    folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
    for stale in folder.glob(f"*.{queue}.msg"):
        stale.unlink(missing_ok=True)


def wait_for(run_id: int, *statuses: str, timeout: float = 300) -> AnalysisRun:
    deadline = time.monotonic() + timeout
    while True:
        run = AnalysisRun.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        assert time.monotonic() < deadline, f"run {run_id} is still {run.status}"
        time.sleep(0.3)


# --- the scenario -----------------------------------------------------------------------------

PRODUCE_RATE = 10  # messages per second into every partition
# partition -> (lag at the first sample, consume rate): p0 slower than the producer.
PARTITIONS = {0: (500, 6), 1: (3000, 15), 2: (1200, 12), 3: (8000, 20)}
STEP_S, SAMPLES = 10, 60


@dataclass
class Scenario:
    bootstrap: str
    topic: str
    group: str
    samples: list[LagSample] = field(default_factory=list)
    messages: Counter[int] = field(default_factory=Counter)  # per partition, as delivered
    keys: Counter[str] = field(default_factory=Counter)


def build_scenario(bootstrap: str) -> Scenario:
    """A topic written with a skewed key distribution, a consumer group on it that commits,
    and that group's lag history on the samples topic: every 10 s for 10 minutes, producers
    at 10 msg/s per partition and a consumer at PARTITIONS' rates (the collector's records)."""
    tag = uuid.uuid4().hex[:8]
    scenario = Scenario(bootstrap, f"orders-{tag}", f"slow-consumer-{tag}")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name, partitions in ((scenario.topic, 4), (LAG_SAMPLES_TOPIC, 6)):
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    _produce_skewed(scenario)
    _commit(scenario)
    _write_history(scenario)
    return scenario


def _produce_skewed(scenario: Scenario) -> None:
    """Half the messages carry the key `hot`, the rest spread over nine keys."""
    producer = Producer({"bootstrap.servers": scenario.bootstrap, "linger.ms": 5})

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        scenario.messages[msg.partition()] += 1
        scenario.keys[msg.key().decode()] += 1

    for i in range(2000):
        key = "hot" if i % 2 == 0 else f"k{i % 9}"
        producer.produce(scenario.topic, f"order {i}".encode(), key.encode(), callback=delivered)
    assert producer.flush(30) == 0


def _commit(scenario: Scenario) -> None:
    consumer = Consumer({"bootstrap.servers": scenario.bootstrap, "group.id": scenario.group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(scenario.topic, p, 1) for p in PARTITIONS],
                        asynchronous=False)
    finally:
        consumer.close()


def _write_history(scenario: Scenario) -> None:
    end = time.time() - 5
    first = end - STEP_S * (SAMPLES - 1)
    producer = Producer({"bootstrap.servers": scenario.bootstrap, "linger.ms": 5})
    for i in range(SAMPLES):
        t = STEP_S * i
        for partition, (lag0, consume) in PARTITIONS.items():
            lag = lag0 + (PRODUCE_RATE - consume) * t
            end_offset = 100_000 + PRODUCE_RATE * t
            status = Status.WARN if consume < PRODUCE_RATE else Status.OK
            sample = LagSample(scenario.group, scenario.topic, partition,
                               int((first + t) * 1000), end_offset - lag, end_offset, lag,
                               lag / PRODUCE_RATE, status)
            scenario.samples.append(sample)
            key, value = encode_lag_sample(sample)
            producer.produce(LAG_SAMPLES_TOPIC, value, key)
    assert producer.flush(30) == 0
