"""Broker configs through confluent-kafka's AdminClient: the sources and read-only flags a
Kafka 4.0 broker reports, dynamic broker configs that take effect and outlive a restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from tests.brokercore.wire import WireClient
from tests.brokerproc import BrokerProcess
from tests.compat.clients import confluent_produce, new_topic, sample_messages
from tests.compat.test_admin_config_effects import create
from tests.compat.test_topic_compression import CODEC_OF, stored_codecs

TIMEOUT = 15
BROKER = 4


def described(admin: AdminClient, kind: str, name: str) -> dict[str, ConfigEntry]:
    [future] = admin.describe_configs([ConfigResource(kind, name)]).values()
    entries: dict[str, ConfigEntry] = future.result(TIMEOUT)
    return entries


def set_broker(admin: AdminClient, name: str, op: AlterConfigOpType, **configs: str) -> None:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=op)
               for k, v in configs.items()]
    resource = ConfigResource("broker", name, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)


# librdkafka refuses a broker resource named "" (Kafka's `--entity-default`), so the
# cluster-wide default is set and read on the wire, as kafka-configs.sh does.
def set_cluster_default(bootstrap: str, name: str, value: str) -> tuple[int, str | None]:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(validate_only=False, resources=[resource(
        resource_type=BROKER, resource_name="",
        configs=[resource.AlterableConfig(name=name, config_operation=0, value=value)])])
    with WireClient(bootstrap) as wire:
        [response] = wire.request(request, version=1).responses
    return response.error_code, response.error_message


def describe_wire(bootstrap: str, name: str, key: str | None = None) -> Any:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[resource(resource_type=BROKER, resource_name=name,
                            configuration_keys=None if key is None else [key])],
        include_synonyms=True, include_documentation=False)
    with WireClient(bootstrap) as wire:
        [result] = wire.request(request, version=4).results
    return result


def synonyms(bootstrap: str, key: str) -> list[tuple[str, str | None, int]]:
    """A broker config's synonyms as the wire carries them (confluent-kafka keys them by
    name, which folds the layers of one key into one)."""
    config = describe_wire(bootstrap, "1", key).configs[0]
    return [(s.name, s.value, s.source) for s in config.synonyms]


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory({"log.retention.hours": "48", "num.partitions": "2"})


def test_a_broker_describes_sources_and_read_only_flags_as_kafka_does(
    broker: BrokerProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = described(admin, "broker", "1")

    def shown(name: str) -> tuple[str | None, ConfigSource, bool]:
        entry = configs[name]
        return entry.value, ConfigSource(entry.source), entry.is_read_only

    assert shown("log.retention.hours") == ("48", ConfigSource.STATIC_BROKER_CONFIG, False)
    assert shown("num.partitions") == ("2", ConfigSource.STATIC_BROKER_CONFIG, True)
    assert shown("compression.type") == ("producer", ConfigSource.DEFAULT_CONFIG, False)
    assert shown("auto.create.topics.enable") == ("true", ConfigSource.DEFAULT_CONFIG, True)
    assert shown("listeners")[1:] == (ConfigSource.STATIC_BROKER_CONFIG, True)
    assert describe_wire(broker.bootstrap, "").configs == []  # no cluster-wide defaults yet


def test_dynamic_broker_configs_layer_take_effect_and_survive_a_restart(
    broker: BrokerProcess,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = new_topic("dyn")
    create(admin, topic)

    assert set_cluster_default(broker.bootstrap, "compression.type", "zstd") == (0, None)
    entry = described(admin, "broker", "1")["compression.type"]
    assert (entry.value, ConfigSource(entry.source), entry.is_read_only) == (
        "zstd", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False)
    [default] = describe_wire(broker.bootstrap, "").configs
    assert (default.name, default.value, default.config_source, default.read_only) == (
        "compression.type", "zstd", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, False)

    set_broker(admin, "1", AlterConfigOpType.SET, compression_type="gzip")
    assert synonyms(broker.bootstrap, "compression.type") == [
        ("compression.type", "gzip", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("compression.type", "zstd", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("compression.type", "producer", ConfigSource.DEFAULT_CONFIG.value),
    ]
    topic_entry = described(admin, "topic", topic)["compression.type"]
    assert (topic_entry.value, ConfigSource(topic_entry.source)) == (
        "gzip", ConfigSource.DYNAMIC_BROKER_CONFIG)
    # The topic existed before: its log takes the broker's new default at once.
    confluent_produce(broker.bootstrap, topic, sample_messages(5), "none")
    assert set(stored_codecs(broker.bootstrap, topic)) == {CODEC_OF["gzip"]}

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert described(admin, "broker", "1")["compression.type"].value == "gzip"
    set_broker(admin, "1", AlterConfigOpType.DELETE, compression_type="")
    entry = described(admin, "broker", "1")["compression.type"]
    assert (entry.value, ConfigSource(entry.source)) == (
        "zstd", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


@pytest.mark.parametrize(("key", "value"), [
    ("listeners", "PLAINTEXT://127.0.0.1:1"),
    ("min.insync.replicas", "many"),
])
def test_static_keys_and_bad_values_are_refused(
    broker: BrokerProcess, key: str, value: str,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        set_broker(admin, "1", AlterConfigOpType.SET, **{key.replace(".", "_"): value})
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    code, message = set_cluster_default(broker.bootstrap, key, value)
    assert code == 40 and message and key in message  # INVALID_CONFIG
    assert describe_wire(broker.bootstrap, "").configs == []
    assert ConfigSource(described(admin, "broker", "1")[key].source) != \
        ConfigSource.DYNAMIC_BROKER_CONFIG
