"""KIP-875: a connector's offsets read, altered and reset over REST.

A source connector's offsets are the offsets topic's records keyed `["<name>", {partition}]`;
a sink connector's are its consumer group `connect-<name>`'s committed offsets, shown as
partition `{"kafka_topic", "kafka_partition"}` and offset `{"kafka_offset"}`. Altering or
resetting needs the connector STOPPED (so no task writes them meanwhile).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from connect.api import SinkConnector
from connect.configdef import ConfigException
from connect.errors import BadRequest
from connect.errors import connector_not_found as not_found
from connect.storage import OffsetStore, dumps

if TYPE_CHECKING:
    from connect.herder import Herder

ALTERED = ("The Connect framework-managed offsets for this connector have been altered "
           "successfully. However, if this connector manages offsets externally, they will "
           "need to be manually altered in the system that the connector uses.")
RESET = ("The Connect framework-managed offsets for this connector have been reset "
         "successfully. However, if this connector manages offsets externally, they will "
         "need to be manually reset in the system that the connector uses.")
SINK_ALTERED = "The offsets for this connector have been altered successfully"
SINK_RESET = "The offsets for this connector have been reset successfully"


def _is_sink(herder: Herder, config: dict[str, str]) -> bool:
    try:
        return issubclass(herder.plugins.find(config.get("connector.class", "")), SinkConnector)
    except ConfigException:
        return False


def read(herder: Herder, name: str, config: dict[str, str]) -> dict[str, Any]:
    if _is_sink(herder, config):
        return {"offsets": _sink_offsets(herder, name)}
    herder.offsets.log.read_to_end()
    return {"offsets": [{"partition": json.loads(p), "offset": o}
                        for p, o in sorted(herder.offsets.of(name).items())]}


def _sink_offsets(herder: Herder, name: str) -> list[dict[str, Any]]:
    group = ConsumerGroupTopicPartitions(f"connect-{name}")
    future = herder.statuses.log.admin.list_consumer_group_offsets([group])[f"connect-{name}"]
    try:
        listed = future.result(30).topic_partitions or []
    except KafkaException:
        return []
    return [{"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
             "offset": {"kafka_offset": tp.offset}} for tp in listed if tp.offset >= 0]


def _stopped(herder: Herder, name: str) -> dict[str, str]:
    snap = herder.configs.snapshot()
    config = snap.connectors.get(name)
    if config is None:
        raise not_found(name)
    if snap.target_states.get(name) != "STOPPED":
        raise BadRequest("Connectors must be in the STOPPED state before their offsets can be "
                         "modified. This can be done for the specified connector by issuing a "
                         f"'PUT' request to the '/connectors/{name}/stop' endpoint")
    return config


def alter(herder: Herder, name: str, body: Any) -> dict[str, str]:
    config = _stopped(herder, name)
    entries = body.get("offsets") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not entries or not all(
            isinstance(e, dict) and isinstance(e.get("partition"), dict) for e in entries):
        raise BadRequest("The offsets to be altered must be given as a non-empty list of "
                         "{\"partition\": {...}, \"offset\": {...} | null}")
    if _is_sink(herder, config):
        _alter_sink(herder, name, entries)
        return {"message": SINK_ALTERED}
    producer = herder.offsets.log.producer
    for entry in entries:
        offset = entry.get("offset")
        producer.produce(herder.offsets.log.topic, key=OffsetStore.record_key(
            name, entry["partition"]), value=None if offset is None else dumps(offset))
    producer.flush(30)
    return {"message": ALTERED}


def _alter_sink(herder: Herder, name: str, entries: list[dict[str, Any]]) -> None:
    partitions = []
    for entry in entries:
        part, offset = entry["partition"], entry.get("offset")
        try:
            partitions.append(TopicPartition(str(part["kafka_topic"]),
                                             int(part["kafka_partition"]),
                                             int(offset["kafka_offset"]) if offset else 0))
        except (KeyError, TypeError, ValueError):
            raise BadRequest("A sink connector's partition is {\"kafka_topic\", "
                             "\"kafka_partition\"} and its offset {\"kafka_offset\"}") from None
    group = ConsumerGroupTopicPartitions(f"connect-{name}", partitions)
    admin = herder.statuses.log.admin
    try:
        admin.alter_consumer_group_offsets([group])[f"connect-{name}"].result(30)
    except KafkaException as exc:
        raise BadRequest(f"Failed to alter consumer group offsets: {exc}") from None


def reset(herder: Herder, name: str) -> dict[str, str]:
    config = _stopped(herder, name)
    if _is_sink(herder, config):
        admin = herder.statuses.log.admin
        try:
            admin.delete_consumer_groups([f"connect-{name}"])[f"connect-{name}"].result(30)
        except KafkaException as exc:
            if "GROUP_ID_NOT_FOUND" not in str(exc):
                raise BadRequest(f"Failed to reset consumer group offsets: {exc}") from None
        return {"message": SINK_RESET}
    herder.offsets.log.read_to_end()
    producer = herder.offsets.log.producer
    for partition in herder.offsets.of(name):
        producer.produce(herder.offsets.log.topic, value=None,
                         key=OffsetStore.record_key(name, json.loads(partition)))
    producer.flush(30)
    herder.offsets.log.read_to_end()
    return {"message": RESET}
