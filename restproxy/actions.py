"""Every state change the proxy makes: produce, topics and configs, consumer instances.

Views parse and negotiate; these functions validate against the cluster, change it through
the Kafka client wrapper, and return Confluent's response bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError

from clusterclient import AcksAllShortfall, ConfigChange, ConfigOperation, ResourceKind

from . import client, errors, records
from .client import DeliveryReport, PendingBatch, cluster, gateway
from .content_types import EmbeddedFormat
from .instances.instance import ConsumerInstance, InstanceConfig
from .instances.manager import manager


def _check_partitions(topic: str, chosen: list[int | None]) -> None:
    known = client.topic(topic)
    for partition in chosen:
        if partition is not None and known.partition(partition) is None:
            raise errors.partition_not_found(partition)


def v2_offset(report: DeliveryReport) -> dict[str, Any]:
    if report.error is None:
        return {"partition": report.partition, "offset": report.offset,
                "error_code": None, "error": None}
    # Confluent's v2 codes: 2 may succeed if retried, 1 will not.
    code = 2 if report.error.retriable() else 1
    return {"partition": report.partition, "offset": None, "error_code": code,
            "error": report.error.str()}


PRODUCE_TIMEOUT = 60.0


@dataclass
class V2Produce:
    """A v2 produce request handed to the producer; `answer` waits for its reports."""

    batch: records.V2Batch
    pending: PendingBatch
    # The broker's ACLs refused the caller (answered 403 40301, not per record): set by
    # `answer`.
    refusal: errors.RestProxyError | None = None

    async def answer(self) -> dict[str, Any]:
        reports = await self.pending.all_done_within(PRODUCE_TIMEOUT)
        self.refusal = next((errors.from_kafka(r.error) for r in reports
                             if r.error is not None and errors.is_refusal(r.error)), None)
        return {
            "key_schema_id": self.batch.key_schema_id,
            "value_schema_id": self.batch.value_schema_id,
            "offsets": [v2_offset(r) for r in reports],
        }


def produce_v2(topic: str, partition: int | None, fmt: EmbeddedFormat,
               body: dict[str, Any]) -> V2Produce:
    client.topic(topic)
    shortfall = client.acks_all_shortfall(topic)
    batch = records.v2_batch(topic, partition, fmt, body)
    _check_partitions(topic, [r.partition for r in batch.records])
    if shortfall is not None:
        return V2Produce(batch, _refused(len(batch.records), shortfall))
    return V2Produce(batch, gateway().produce(topic, batch.records))


def _refused(count: int, shortfall: AcksAllShortfall) -> PendingBatch:
    """Reports of records no acks=all write can place: each refused as the broker would."""
    batch = PendingBatch(count)
    for index in range(count):
        batch.fail(index, not_enough_replicas(shortfall))
    return batch


def not_enough_replicas(shortfall: AcksAllShortfall) -> KafkaError:
    return KafkaError(KafkaError.NOT_ENOUGH_REPLICAS, shortfall.message)


def v3_report(cluster_id: str, topic: str, entry: records.V3Entry,
              report: DeliveryReport) -> dict[str, Any]:
    if report.error is not None:
        failure = errors.from_kafka(report.error, topic)
        # A record's error_code is its HTTP status, except an ACL's refusal (or a failed
        # login), which carries Confluent's own code (40301, 40101) as v2 answers it.
        code = failure.error_code if failure.status in (401, 403) else failure.status
        return {"error_code": code, "message": failure.message}
    record = entry.record
    body: dict[str, Any] = {
        "error_code": 200, "cluster_id": cluster_id, "topic_name": topic,
        "partition_id": report.partition, "offset": report.offset,
        "timestamp": records.iso_timestamp(report.timestamp),
    }
    for role, data, kind in (("key", record.key, entry.key_type),
                             ("value", record.value, entry.value_type)):
        body[role] = None if kind is None else {
            "type": kind, "size": 0 if data is None else len(data)
        }
    return body


def produce_v3(topic: str, entries: list[records.V3Entry | errors.RestProxyError],
               batch: PendingBatch | None = None) -> PendingBatch:
    """Start producing v3 entries (ones that failed to parse are already final), their
    reports after those already in `batch` (a stream's); the caller collects them in order."""
    known = client.topic(topic)
    shortfall = client.acks_all_shortfall(topic)
    kafka = gateway()
    if batch is None:
        batch = PendingBatch(0, kafka)
    first = batch.extend(len(entries))
    for index, entry in enumerate(entries, first):
        if isinstance(entry, errors.RestProxyError):
            batch.complete(index)
            continue
        if shortfall is not None:
            batch.fail(index, not_enough_replicas(shortfall))
            continue
        partition = entry.record.partition
        if partition is not None and known.partition(partition) is None:
            batch.fail(index, KafkaError(KafkaError._UNKNOWN_PARTITION))
            continue
        kafka.produce_one(topic, entry.record, batch, index)
    return batch


# --- consumer instances -----------------------------------------------------------------

_RESETS = {"earliest": "earliest", "smallest": "earliest", "latest": "latest",
           "largest": "latest", "none": "error"}


def _config_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    raise errors.invalid_consumer_config(f"{name} must be true or false")


def _config_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise errors.invalid_consumer_config(f"{name} must be an integer") from exc


def instance_config(body: dict[str, Any], default_timeout_ms: int) -> InstanceConfig:
    try:
        fmt = EmbeddedFormat(str(body.get("format") or "binary").lower())
    except ValueError as exc:
        raise errors.invalid_consumer_config(f"Invalid format type {body.get('format')}") from exc
    reset = _RESETS.get(str(body.get("auto.offset.reset") or "latest").lower())
    if reset is None:
        raise errors.invalid_consumer_config("auto.offset.reset must be earliest or latest")
    timeout = _config_int(body.get("consumer.request.timeout.ms"), "consumer.request.timeout.ms")
    return InstanceConfig(
        format=fmt,
        auto_offset_reset=reset,
        auto_commit_enable=_config_bool(body.get("auto.commit.enable", True), "auto.commit.enable"),
        fetch_min_bytes=_config_int(body.get("fetch.min.bytes"), "fetch.min.bytes"),
        request_timeout_ms=default_timeout_ms if timeout is None else timeout,
    )


def create_consumer_instance(group: str, body: dict[str, Any], default_timeout_ms: int
                             ) -> ConsumerInstance:
    name = body.get("name") or body.get("id")
    if name is not None and not isinstance(name, str):
        raise errors.invalid_consumer_config("name must be a string")
    return manager().create(group, name, instance_config(body, default_timeout_ms))


def delete_consumer_instance(group: str, name: str) -> None:
    manager().delete(group, name)


# --- topics and configs (v3) ------------------------------------------------------------

def create_topic(body: dict[str, Any]) -> str:
    name = body.get("topic_name")
    if not isinstance(name, str) or not name:
        raise errors.bad_request("topic_name is required")
    configs = body.get("configs") or []
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        raise errors.bad_request("configs must be a list of {name, value}")
    try:
        partitions = int(body.get("partitions_count", -1))
        replication = int(body.get("replication_factor", -1))
    except (TypeError, ValueError) as exc:
        raise errors.bad_request("partitions_count and replication_factor are integers") from exc
    cluster().create_topic(name, partitions, replication,
                           {str(c["name"]): str(c.get("value")) for c in configs},
                           validate_only=bool(body.get("validate_only")))
    return name


def delete_topic(name: str) -> None:
    client.topic(name)
    cluster().delete_topic(name)


def set_partition_count(name: str, count: int) -> None:
    client.topic(name)
    cluster().create_partitions(name, count)




def alter_topic_configs(name: str, changes: list[dict[str, Any]],
                        validate_only: bool = False) -> None:
    """Incrementally SET or DELETE (reset to default) topic configs in one request."""
    client.topic(name)
    entries = []
    for change in changes:
        if not isinstance(change, dict) or not isinstance(change.get("name"), str):
            raise errors.bad_request("each config change needs a name")
        try:
            operation = ConfigOperation(str(change.get("operation") or "SET").upper())
        except ValueError as exc:
            raise errors.bad_request(f"Unknown operation {change.get('operation')}") from exc
        value = change.get("value")
        entries.append(ConfigChange(change["name"], None if value is None else str(value),
                                    operation))
    cluster().incremental_alter_configs(ResourceKind.TOPIC, name, entries, validate_only)
