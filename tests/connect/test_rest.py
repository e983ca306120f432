"""Kafka Connect's REST API against one worker process: every endpoint, answered in Kafka's
shapes and status codes, with FileStream connectors configured as Kafka's docs show."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.connect.workers import WorkerProcess, read_topic, wait_for

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
# The connector README.md shows (stopping at 5), as a user drops it into plugin.path.
COUNTER_PLUGIN = """
from connect.api import SourceConnector, SourceTask, SourceRecord, STRING_SCHEMA
from connect.configdef import ConfigDef, Importance, NO_DEFAULT, Type

class CounterSourceConnector(SourceConnector):
    def config(self) -> ConfigDef:
        return ConfigDef().define("topic", Type.STRING, NO_DEFAULT, Importance.HIGH,
                                  "Where the counts go")
    def start(self, props): self.props = dict(props)
    def task_class(self): return CounterTask
    def task_configs(self, max_tasks): return [self.props]
    def exactly_once_support(self, props): return True

class CounterTask(SourceTask):
    def start(self, props):
        self.topic = props["topic"]
        stored = self.context.offset_storage_reader.offset({"counter": "main"})
        self.n = stored["n"] if stored else 0
    def poll(self):
        if self.n >= 5:
            return None
        self.n += 1
        return [SourceRecord({"counter": "main"}, {"n": self.n}, self.topic, str(self.n),
                             STRING_SCHEMA)]
    def stop(self): pass
"""


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    group = f"connect-rest-{uuid.uuid4().hex[:8]}"
    plugins = tmp_path_factory.mktemp("plugins")
    (plugins / "counter.py").write_text(COUNTER_PLUGIN)
    proc = WorkerProcess(tmp_path_factory.mktemp("connect-rest"), kafka_bootstrap, group,
                         {"plugin.path": str(plugins)})
    proc.start()
    yield proc
    proc.stop()


def _name() -> str:
    return f"c-{uuid.uuid4().hex[:8]}"


def _create(worker: WorkerProcess, name: str, config: dict[str, str], **extra: Any) -> Any:
    answer = worker.request("POST", "/connectors", {"name": name, "config": config, **extra})
    assert answer.status_code == 201, answer.text
    return answer.json()


def _status(worker: WorkerProcess, name: str, connector: str, tasks: str | None = None
            ) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        answer = worker.get(f"/connectors/{name}/status")
        if answer.status_code != 200:
            return None
        body: dict[str, Any] = answer.json()
        states = [t["state"] for t in body["tasks"]]
        ok = body["connector"]["state"] == connector and (
            tasks is None or (states and all(s == tasks for s in states)))
        return body if ok else None
    found: dict[str, Any] = wait_for(
        reached, 30, f"{name} never reached {connector}/{tasks}: "
        f"{worker.get(f'/connectors/{name}/status').text}\n{worker.log()}")
    return found


def _error(answer: Any, status: int) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == status
    return str(body["message"])


def test_root_names_version_commit_and_cluster(worker: WorkerProcess) -> None:
    body = worker.get("/").json()
    assert set(body) == {"version", "commit", "kafka_cluster_id"}
    assert body["kafka_cluster_id"]


def test_plugins_are_listed_with_kafkas_class_names(worker: WorkerProcess) -> None:
    plugins = {p["class"]: p for p in worker.get("/connector-plugins").json()}
    assert plugins[SOURCE]["type"] == "source" and plugins[SINK]["type"] == "sink"
    assert set(plugins[SOURCE]) == {"class", "type", "version"}
    keys = [d["name"] for d in worker.get("/connector-plugins/FileStreamSource/config").json()]
    assert keys == ["file", "topic", "batch.size"]


def test_validate_answers_per_key_in_kafkas_shape(worker: WorkerProcess) -> None:
    answer = worker.request("PUT", "/connector-plugins/FileStreamSourceConnector/config/validate",
                            {"connector.class": "FileStreamSource", "tasks.max": "0",
                             "name": "x"})
    body = answer.json()
    assert answer.status_code == 200 and body["name"] == SOURCE
    assert set(body) == {"name", "error_count", "groups", "configs"}
    by_name = {c["value"]["name"]: c for c in body["configs"]}
    assert set(by_name["topic"]) == {"definition", "value"}
    assert set(by_name["topic"]["value"]) == {"name", "value", "recommended_values", "errors",
                                             "visible"}
    assert by_name["topic"]["definition"]["required"] is True
    assert by_name["topic"]["value"]["errors"] and by_name["tasks.max"]["value"]["errors"]
    assert body["error_count"] == 2 and "Common" in body["groups"]
    good = worker.request("PUT", "/connector-plugins/FileStreamSink/config/validate",
                          {"connector.class": SINK, "topics": "t", "name": "x"}).json()
    assert good["error_count"] == 0
    mismatch = worker.request("PUT", "/connector-plugins/FileStreamSink/config/validate",
                              {"connector.class": SOURCE, "topics": "t"})
    _error(mismatch, 400)


def test_kafkas_quickstart_configs_copy_a_file_through_a_topic(
        worker: WorkerProcess, kafka_bootstrap: str, tmp_path: Path) -> None:
    source, sink, topic = _name(), _name(), f"connect-test-{uuid.uuid4().hex[:6]}"
    (tmp_path / "test.txt").write_text("foo\nbar\n")
    created = _create(worker, source, {"connector.class": "FileStreamSource", "tasks.max": "1",
                                       "file": str(tmp_path / "test.txt"), "topic": topic})
    assert created == {"name": source, "type": "source", "tasks": [], "config": {
        "connector.class": "FileStreamSource", "tasks.max": "1",
        "file": str(tmp_path / "test.txt"), "topic": topic, "name": source}}
    _create(worker, sink, {"connector.class": SINK, "tasks.max": "1",
                           "file": str(tmp_path / "test.sink.txt"), "topics": topic})
    _status(worker, source, "RUNNING", "RUNNING")
    wait_for(lambda: (tmp_path / "test.sink.txt").exists() and
             (tmp_path / "test.sink.txt").read_text() == "foo\nbar\n", 30)
    assert read_topic(kafka_bootstrap, topic, 2) == [b"foo", b"bar"]
    info = worker.get(f"/connectors/{source}").json()
    assert info["tasks"] == [{"connector": source, "task": 0}]
    tasks = worker.get(f"/connectors/{source}/tasks").json()
    assert tasks[0]["id"] == {"connector": source, "task": 0} and tasks[0]["config"]["topic"]
    assert worker.get(f"/connectors/{source}/topics").json() == {source: {"topics": [topic]}}
    task = worker.get(f"/connectors/{source}/tasks/0/status").json()
    assert task == {"id": 0, "state": "RUNNING", "worker_id": f"127.0.0.1:{worker.port}"}
    offsets = worker.get(f"/connectors/{source}/offsets").json()
    assert offsets == {"offsets": [{"partition": {"filename": str(tmp_path / "test.txt")},
                                    "offset": {"position": 8}}]}
    sink_offsets = worker.get(f"/connectors/{sink}/offsets").json()["offsets"]
    assert sink_offsets == [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                             "offset": {"kafka_offset": 2}}]
    listed = worker.get("/connectors?expand=status&expand=info").json()
    assert set(listed[source]) == {"status", "info"} and listed[source]["info"] == info
    assert source in worker.get("/connectors").json()


def test_bad_input_gets_connects_errors(worker: WorkerProcess, tmp_path: Path) -> None:
    unknown = worker.request("POST", "/connectors", {"name": _name(), "config": {
        "connector.class": "com.example.NoSuchConnector", "topic": "t"}})
    assert "Failed to find any class that implements Connector" in _error(unknown, 400)
    invalid = worker.request("POST", "/connectors", {"name": _name(), "config": {
        "connector.class": "FileStreamSource", "file": "x"}})
    message = _error(invalid, 400)
    assert message.startswith("Connector configuration is invalid and contains the following "
                              "1 error(s):\nMissing required configuration \"topic\"")
    name = _name()
    _create(worker, name, {"connector.class": "FileStreamSink", "topics": "t",
                           "file": str(tmp_path / "o")})
    again = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSink", "topics": "t"}})
    assert _error(again, 409) == f"Connector {name} already exists"
    assert _error(worker.get("/connectors/nope"), 404) == "Connector nope not found"
    _error(worker.get("/connectors/nope/status"), 404)
    _error(worker.get(f"/connectors/{name}/tasks/7/status"), 404)
    _error(worker.get("/no/such/path"), 404)
    _error(worker.request("DELETE", "/connectors"), 405)
    bad_json = worker.request("POST", "/connectors", None)
    _error(bad_json, 400)
    no_topics = {"connector.class": "FileStreamSink"}
    _error(worker.request("PUT", f"/connectors/{name}/config", no_topics), 400)


def test_config_put_creates_then_updates_and_patch_merges(worker: WorkerProcess,
                                                          tmp_path: Path) -> None:
    name = _name()
    config = {"connector.class": "FileStreamSink", "topics": "a", "file": str(tmp_path / "o")}
    created = worker.request("PUT", f"/connectors/{name}/config", config)
    assert created.status_code == 201 and created.json()["name"] == name
    updated = worker.request("PUT", f"/connectors/{name}/config", {**config, "topics": "b"})
    assert updated.status_code == 200
    patched = worker.request("PATCH", f"/connectors/{name}/config", {"tasks.max": "2"})
    assert patched.status_code == 200
    assert worker.get(f"/connectors/{name}/config").json() == {
        **config, "topics": "b", "tasks.max": "2", "name": name}
    wait_for(lambda: len(worker.get(f"/connectors/{name}/tasks").json()) == 2, 30)


def test_pause_resume_stop_restart_and_offsets_of_a_stopped_connector(
        worker: WorkerProcess, tmp_path: Path) -> None:
    name, topic = _name(), f"t-{uuid.uuid4().hex[:6]}"
    (tmp_path / "in.txt").write_text("one\ntwo\n")
    _create(worker, name, {"connector.class": "FileStreamSource", "topic": topic,
                           "file": str(tmp_path / "in.txt")})
    _status(worker, name, "RUNNING", "RUNNING")
    assert worker.request("PUT", f"/connectors/{name}/pause").status_code == 202
    _status(worker, name, "PAUSED", "PAUSED")
    assert worker.request("PUT", f"/connectors/{name}/resume").status_code == 202
    _status(worker, name, "RUNNING", "RUNNING")
    assert worker.request("POST", f"/connectors/{name}/restart").status_code == 204
    plan = worker.request("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=false")
    assert plan.status_code == 202
    assert plan.json()["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in plan.json()["tasks"]] == ["RESTARTING"]
    assert worker.request("POST", f"/connectors/{name}/tasks/0/restart").status_code == 204
    _status(worker, name, "RUNNING", "RUNNING")
    wait_for(lambda: worker.get(f"/connectors/{name}/offsets").json()["offsets"], 30)
    running = worker.request("PATCH", f"/connectors/{name}/offsets", {"offsets": []})
    assert "STOPPED state" in _error(running, 400)
    assert worker.request("PUT", f"/connectors/{name}/stop").status_code == 204
    _status(worker, name, "STOPPED")
    assert worker.get(f"/connectors/{name}/tasks").json() == []
    partition = {"filename": str(tmp_path / "in.txt")}
    altered = worker.request("PATCH", f"/connectors/{name}/offsets", {"offsets": [
        {"partition": partition, "offset": {"position": 4}}]})
    assert altered.status_code == 200 and "altered successfully" in altered.json()["message"]
    assert worker.get(f"/connectors/{name}/offsets").json()["offsets"] == [
        {"partition": partition, "offset": {"position": 4}}]
    reset = worker.request("DELETE", f"/connectors/{name}/offsets")
    assert reset.status_code == 200 and "reset successfully" in reset.json()["message"]
    assert worker.get(f"/connectors/{name}/offsets").json() == {"offsets": []}
    assert worker.request("PUT", f"/connectors/{name}/topics/reset").status_code == 202
    assert worker.get(f"/connectors/{name}/topics").json() == {name: {"topics": []}}
    assert worker.request("DELETE", f"/connectors/{name}").status_code == 204
    _error(worker.get(f"/connectors/{name}"), 404)
    assert name not in worker.get("/connectors").json()


def test_a_vanished_file_fails_the_task_with_its_trace_and_the_worker_goes_on(
        worker: WorkerProcess, tmp_path: Path) -> None:
    name, path = _name(), tmp_path / "gone.txt"
    path.write_text("a\n")
    _create(worker, name, {"connector.class": "FileStreamSource", "topic": f"t-{name}",
                           "file": str(path)})
    _status(worker, name, "RUNNING", "RUNNING")
    path.unlink()
    failed = _status(worker, name, "RUNNING", "FAILED")
    assert "vanished" in failed["tasks"][0]["trace"]
    assert worker.get("/").status_code == 200
    path.write_text("b\n")
    worker.request("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")
    _status(worker, name, "RUNNING", "RUNNING")


def test_records_that_fail_conversion_go_to_the_dead_letter_queue(
        worker: WorkerProcess, kafka_bootstrap: str, tmp_path: Path) -> None:
    name, topic = _name(), f"t-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for value in (b'{"schema":null,"payload":"good"}', b"not json", b'{"x":1}'):
        producer.produce(topic, value)
    producer.flush(10)
    _create(worker, name, {
        "connector.class": "FileStreamSink", "topics": topic, "file": str(tmp_path / "o"),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": f"{topic}-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"})
    wait_for(lambda: (tmp_path / "o").exists() and (tmp_path / "o").read_text() == "good\n", 30)
    assert read_topic(kafka_bootstrap, f"{topic}-dlq", 2) == [b"not json", b'{"x":1}']


def test_datagen_quickstart_writes_users_with_their_schema(
        worker: WorkerProcess, kafka_bootstrap: str) -> None:
    name, topic = _name(), f"users-{uuid.uuid4().hex[:6]}"
    _create(worker, name, {
        "connector.class": "io.confluent.kafka.connect.datagen.DatagenConnector",
        "kafka.topic": topic, "quickstart": "users", "iterations": "20", "max.interval": "0",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter"})
    records = read_topic(kafka_bootstrap, topic, 20)
    assert len(records) == 20
    first = json.loads(records[0])
    assert first["schema"]["type"] == "struct" and first["schema"]["name"] == "ksql.users"
    assert set(first["payload"]) == {"registertime", "userid", "regionid", "gender"}
    wrong = worker.request("POST", "/connectors", {"name": _name(), "config": {
        "connector.class": "DatagenConnector", "kafka.topic": "t", "quickstart": "nope"}})
    assert "quickstart" in _error(wrong, 400)


def test_a_connector_created_stopped_or_paused_starts_so(worker: WorkerProcess,
                                                         tmp_path: Path) -> None:
    stopped, paused = _name(), _name()
    sink = {"connector.class": "FileStreamSink", "topics": "t", "file": str(tmp_path / "o")}
    _create(worker, stopped, sink, initial_state="STOPPED")
    _create(worker, paused, sink, initial_state="PAUSED")
    _status(worker, stopped, "STOPPED")
    assert worker.get(f"/connectors/{stopped}/tasks").json() == []
    _status(worker, paused, "PAUSED", "PAUSED")
    bad = worker.request("POST", "/connectors", {"name": _name(), "config": sink,
                                                 "initial_state": "SLEEPING"})
    _error(bad, 400)


def test_a_connector_dropped_into_plugin_path_is_listed_and_runs(
        worker: WorkerProcess, kafka_bootstrap: str) -> None:
    listed = [p["class"] for p in worker.get("/connector-plugins").json()]
    assert "connect_plugin_counter.CounterSourceConnector" in listed
    name, topic = _name(), f"counts-{uuid.uuid4().hex[:6]}"
    _create(worker, name, {"connector.class": "CounterSource", "topic": topic})
    assert read_topic(kafka_bootstrap, topic, 5) == [b"1", b"2", b"3", b"4", b"5"]


def test_log_levels_are_read_and_set_as_kip_495_does(worker: WorkerProcess) -> None:
    levels = worker.get("/admin/loggers").json()
    assert levels["root"]["level"] == "INFO"
    changed = worker.request("PUT", "/admin/loggers/connect", {"level": "DEBUG"})
    assert changed.status_code == 200 and "connect.herder" in changed.json()
    herder = worker.get("/admin/loggers/connect.herder").json()
    assert herder["level"] == "DEBUG" and herder["last_modified"] > 0
    worker.request("PUT", "/admin/loggers/connect", {"level": "INFO"})
    _error(worker.request("PUT", "/admin/loggers/connect", {"level": "LOUD"}), 400)
    _error(worker.request("PUT", "/admin/loggers/connect", {}), 400)
    _error(worker.get("/admin/loggers/no.such.logger"), 404)


def test_a_worker_that_cannot_make_its_topics_says_why_and_exits(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    # Kafka's default replication factor (3) on a single broker
    proc = WorkerProcess(tmp_path, kafka_bootstrap, f"connect-rf-{uuid.uuid4().hex[:6]}",
                         {"config.storage.replication.factor": "3"})
    with pytest.raises(RuntimeError, match="the worker exited"):
        proc.start()
    assert proc.proc is not None and proc.proc.returncode == 1
    assert "could not set up the worker's internal topics" in proc.log()
    assert "INVALID_REPLICATION_FACTOR" in proc.log()
