"""The Connect group protocol's bytes, the converters and the worker's properties file:
round trips and the errors bad input gets (no sockets)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connect import protocol
from connect.api import STRING_SCHEMA, DataException, Schema
from connect.assignor import IncrementalAssignor, assign_eager
from connect.config import WorkerConfig, read_properties
from connect.configdef import ConfigException
from connect.converters import build_converter, converter_class

names = st.text(min_size=1, max_size=20)


@given(st.builds(protocol.WorkerState, st.text(max_size=40), st.integers(-1, 2**62)))
def test_member_metadata_round_trips(state: protocol.WorkerState) -> None:
    assert protocol.decode_metadata(protocol.encode_metadata(state)) == state


@given(st.lists(names, unique=True, max_size=5),
       st.lists(st.tuples(names, st.integers(0, 50)), unique=True, max_size=8))
def test_assignments_round_trip(connectors: list[str], tasks: list[tuple[str, int]]) -> None:
    assignment = protocol.Assignment(0, "leader-1", "http://h:8083", 42, tuple(connectors),
                                     tuple(tasks))
    decoded = protocol.decode_assignment(protocol.encode_assignment(assignment))
    assert decoded.connectors == assignment.connectors
    assert sorted(decoded.tasks) == sorted(tasks)
    assert (decoded.leader, decoded.leader_url, decoded.config_offset) == (
        "leader-1", "http://h:8083", 42)


def test_the_eager_assignment_spreads_connectors_and_tasks_round_robin() -> None:
    members = {m: protocol.WorkerState(f"http://{m}", 0) for m in ("w2", "w1")}
    plan = assign_eager(members, ["b", "a"], [("a", 0), ("a", 1), ("b", 0)])
    assert (plan["w1"].connectors, plan["w1"].tasks) == ({"a"}, {("a", 0), ("b", 0)})
    assert (plan["w2"].connectors, plan["w2"].tasks) == ({"b"}, {("a", 1)})


@given(st.builds(protocol.Assignment, st.integers(0, 1), names, names, st.integers(0, 2**40),
                 st.lists(names, unique=True, max_size=3).map(tuple),
                 st.lists(st.tuples(names, st.integers(0, 9)), unique=True, max_size=4).map(tuple),
                 st.lists(names, unique=True, max_size=3).map(tuple),
                 st.lists(st.tuples(names, st.integers(0, 9)), unique=True, max_size=4).map(tuple),
                 st.integers(0, 2**31 - 1)))
def test_cooperative_assignments_and_metadata_round_trip(assignment: protocol.Assignment) -> None:
    decoded = protocol.decode_assignment(protocol.encode_assignment(assignment, 1))
    assert (set(decoded.connectors), set(decoded.tasks), set(decoded.revoked_connectors),
            set(decoded.revoked_tasks), decoded.delay_ms) == (
        set(assignment.connectors), set(assignment.tasks), set(assignment.revoked_connectors),
        set(assignment.revoked_tasks), assignment.delay_ms)
    state = protocol.WorkerState("http://w:8083", 7, decoded)
    assert protocol.decode_metadata(protocol.encode_metadata(state, 1)) == state


def _member(connectors: set[str], tasks: set[tuple[str, int]]) -> protocol.WorkerState:
    return protocol.WorkerState("http://w", 0, protocol.Assignment(
        0, "l", "http://l", 0, tuple(sorted(connectors)), tuple(sorted(tasks))))


def test_a_joining_worker_gets_tasks_without_the_others_stopping_what_they_keep() -> None:
    assignor = IncrementalAssignor(max_delay_ms=0)
    tasks = [("a", i) for i in range(4)]
    first = assignor.assign({"w1": protocol.WorkerState("http://w", 0)}, ["a"], tasks, 0)
    assert first["w1"].tasks == set(tasks) and not first["w1"].revoked_tasks
    members = {"w1": _member({"a"}, set(tasks)), "w2": protocol.WorkerState("http://w", 0)}
    second = assignor.assign(members, ["a"], tasks, 1)
    assert second["w1"].revoked_tasks == {("a", 2), ("a", 3)}
    assert second["w1"].tasks == {("a", 0), ("a", 1)} and second["w2"].tasks == set()
    members = {"w1": _member({"a"}, {("a", 0), ("a", 1)}), "w2": protocol.WorkerState("u", 0)}
    third = assignor.assign(members, ["a"], tasks, 2)
    assert third["w2"].tasks == {("a", 2), ("a", 3)} and not third["w1"].revoked_tasks


def test_what_a_departed_worker_ran_waits_for_the_delay_then_moves() -> None:
    assignor = IncrementalAssignor(max_delay_ms=1000)
    tasks = [("a", 0), ("a", 1)]
    members = {"w1": _member({"a"}, {("a", 0)}), "w2": _member(set(), {("a", 1)})}
    assignor.assign(members, ["a"], tasks, 0)
    alone = {"w1": _member({"a"}, {("a", 0)})}
    waiting = assignor.assign(alone, ["a"], tasks, 100)
    assert waiting["w1"].tasks == {("a", 0)} and waiting["w1"].delay_ms == 1000
    still = assignor.assign(alone, ["a"], tasks, 600)
    assert still["w1"].tasks == {("a", 0)} and still["w1"].delay_ms == 500
    moved = assignor.assign(alone, ["a"], tasks, 1200)
    assert moved["w1"].tasks == set(tasks) and moved["w1"].delay_ms == 0


def test_deleted_connectors_are_revoked() -> None:
    assignor = IncrementalAssignor(max_delay_ms=0)
    plan = assignor.assign({"w1": _member({"a", "b"}, {("a", 0), ("b", 0)})}, ["a"],
                           [("a", 0)], 0)
    assert plan["w1"].revoked_connectors == {"b"} and plan["w1"].revoked_tasks == {("b", 0)}


def test_json_converter_writes_kafkas_envelope_and_reads_it_back() -> None:
    converter = build_converter({"value.converter": "JsonConverter"}, "value.converter", False)
    data = converter.from_connect_data("t", STRING_SCHEMA, "hello")
    assert data == b'{"schema":{"type":"string","optional":false},"payload":"hello"}'
    assert converter.to_connect_data("t", data) == (STRING_SCHEMA, "hello")
    struct = Schema("struct", fields=(("id", Schema("int64")), ("raw", Schema("bytes"))))
    back = converter.to_connect_data("t", converter.from_connect_data(
        "t", struct, {"id": 1, "raw": b"\x00\x01"}))
    assert back == (struct, {"id": 1, "raw": b"\x00\x01"})


def test_json_converter_without_schemas_reads_plain_json() -> None:
    converter = build_converter({}, "value.converter", False, {
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false"})
    assert converter.to_connect_data("t", b'{"a": [1, 2]}') == (None, {"a": [1, 2]})
    assert converter.from_connect_data("t", None, {"a": 1}) == b'{"a":1}'


@pytest.mark.parametrize("data", [b"not json", b'{"a": 1}', b'{"schema": null}'])
def test_undecodable_records_raise_data_exception(data: bytes) -> None:
    converter = build_converter({"value.converter": "JsonConverter"}, "value.converter", False)
    with pytest.raises(DataException):
        converter.to_connect_data("t", data)


def test_string_and_byte_array_converters_keep_kafkas_names() -> None:
    string = converter_class("org.apache.kafka.connect.storage.StringConverter")()
    string.configure({}, False)
    assert string.from_connect_data("t", None, "é") == "é".encode()
    raw = converter_class("org.apache.kafka.connect.converters.ByteArrayConverter")()
    raw.configure({}, False)
    with pytest.raises(DataException):
        raw.from_connect_data("t", None, "text")
    with pytest.raises(ConfigException):
        converter_class("io.confluent.connect.avro.NoSuchConverter")


def test_worker_properties_use_kafkas_keys() -> None:
    props = read_properties("""
# connect-distributed.properties
bootstrap.servers=localhost:9092
group.id = connect-cluster
config.storage.topic: connect-configs
offset.storage.topic=connect-offsets
status.storage.topic=connect-status
listeners=HTTP://:8083
exactly.once.source.support=enabled
""")
    config = WorkerConfig.from_props(props)
    assert (config.group_id, config.config_topic, config.rest_port) == (
        "connect-cluster", "connect-configs", 8083)
    assert config.exactly_once_source and config.config_replication == 3
    with pytest.raises(ConfigException, match=r"group\.id"):
        WorkerConfig.from_props({k: v for k, v in props.items() if k != "group.id"})
