"""The Connect group protocol's bytes, the converters and the worker's properties file:
round trips and the errors bad input gets (no sockets)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connect import protocol
from connect.api import STRING_SCHEMA, DataException, Schema
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
    plan = protocol.assign(members, ["b", "a"], [("a", 0), ("a", 1), ("b", 0)])
    assert plan == {"w1": (["a"], [("a", 0), ("b", 0)]), "w2": (["b"], [("a", 1)])}


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
