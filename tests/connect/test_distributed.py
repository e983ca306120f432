"""Two workers in one Connect group, as real processes. A second worker joining takes over
one task while the other keeps running; requests to a follower reach the leader; and when
the worker running the file source is killed with SIGKILL mid-file, the survivor takes its
tasks (after scheduled.rebalance.max.delay.ms) and resumes from the offsets topic: every line
lands in the topic exactly once (exactly-once source, KIP-618) and in the sink file."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from tests.connect.workers import WorkerProcess, read_topic, wait_for

LINES = 3000


def _owner(worker: WorkerProcess, name: str) -> str | None:
    answer = worker.get(f"/connectors/{name}/status")
    if answer.status_code != 200:
        return None
    tasks = answer.json()["tasks"]
    return tasks[0]["worker_id"] if tasks and tasks[0]["state"] == "RUNNING" else None


def _write_slowly(path: Path, stop: threading.Event) -> None:
    with open(path, "a") as out:
        for i in range(LINES):
            out.write(f"line-{i}\n")
            if i % 100 == 99:
                out.flush()
                stop.wait(0.05)


def test_a_joining_worker_takes_tasks_and_a_killed_ones_move_back_losing_nothing(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    group, topic = f"connect-dist-{uuid.uuid4().hex[:8]}", f"lines-{uuid.uuid4().hex[:6]}"
    extra = {"exactly.once.source.support": "enabled",
             "scheduled.rebalance.max.delay.ms": "2000"}
    first = WorkerProcess(tmp_path, kafka_bootstrap, group, extra).start()
    workers = {f"127.0.0.1:{first.port}": first}
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("")
    sink = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic}
    try:
        for body in ({"name": "b-source", "config": {
                "connector.class": "FileStreamSource", "file": str(source_file),
                "topic": topic}}, {"name": "a-sink", "config": sink}):
            answer = first.request("POST", "/connectors", body)
            assert answer.status_code == 201, answer.text
        wait_for(lambda: _owner(first, "b-source") and _owner(first, "a-sink"), 40)
        second = WorkerProcess(tmp_path, kafka_bootstrap, group, extra).start()
        workers[f"127.0.0.1:{second.port}"] = second
        # The newcomer is given one of the two tasks; the other keeps running where it was.
        owners = wait_for(lambda: (_owner(first, "b-source"), _owner(first, "a-sink"))
                          if {_owner(first, "b-source"), _owner(first, "a-sink")} == set(workers)
                          else None, 40, f"no task moved:\n{second.log()}")
        # Either worker takes writes: the follower forwards them to the leader.
        for worker in workers.values():
            answer = worker.request("PUT", "/connectors/a-sink/config", sink)
            assert answer.status_code == 200, answer.text
        stop = threading.Event()
        writer = threading.Thread(target=_write_slowly, args=(source_file, stop))
        writer.start()
        wait_for(lambda: sink_file.exists() and sink_file.read_text().count("\n") > 300, 30)
        victim = workers[owners[0]]
        victim.kill()
        writer.join()
        survivor = next(w for w in workers.values() if w is not victim)
        wait_for(lambda: _owner(survivor, "b-source") == f"127.0.0.1:{survivor.port}", 60,
                 f"the survivor never took the source:\n{survivor.log()}")
        expected = [f"line-{i}" for i in range(LINES)]
        wait_for(lambda: sink_file.read_text().count("\n") >= LINES, 60,
                 f"the sink stopped at {sink_file.read_text().count(chr(10))} lines")
        in_topic = [v.decode() for v in read_topic(kafka_bootstrap, topic, LINES)]
        assert in_topic == expected
        assert sink_file.read_text().splitlines() == expected
    finally:
        for worker in workers.values():
            worker.stop()
