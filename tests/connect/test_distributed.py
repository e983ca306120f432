"""Two workers in one Connect group, as real processes: requests to a follower reach the
leader, tasks spread over both, and when the worker running the file source is killed with
SIGKILL mid-file, the survivor takes its tasks and resumes from the offsets topic: every line
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


def test_killing_a_worker_moves_its_tasks_and_loses_or_doubles_nothing(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    group, topic = f"connect-dist-{uuid.uuid4().hex[:8]}", f"lines-{uuid.uuid4().hex[:6]}"
    extra = {"exactly.once.source.support": "enabled"}
    first = WorkerProcess(tmp_path, kafka_bootstrap, group, extra).start()
    second = WorkerProcess(tmp_path, kafka_bootstrap, group, extra).start()
    workers = {f"127.0.0.1:{w.port}": w for w in (first, second)}
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("")
    try:
        # Both workers take writes: the follower forwards them to the leader.
        for worker, body in ((second, {"name": "b-source", "config": {
                "connector.class": "FileStreamSource", "file": str(source_file),
                "topic": topic}}), (first, {"name": "a-sink", "config": {
                "connector.class": "FileStreamSink", "file": str(sink_file),
                "topics": topic}})):
            answer = worker.request("POST", "/connectors", body)
            assert answer.status_code == 201, answer.text
        owners = wait_for(lambda: (_owner(first, "b-source"), _owner(first, "a-sink"))
                          if all((_owner(first, "b-source"), _owner(first, "a-sink")))
                          else None, 40)
        assert owners[0] != owners[1], "eager round robin puts the two tasks apart"
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
