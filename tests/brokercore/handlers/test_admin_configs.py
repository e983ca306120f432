"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on the wire."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from brokercore.config import BROKER_CONFIGS, DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIGS
from brokercore.protocol.errors import ErrorCode
from tests.brokercore.wire import WireClient
from tests.compat.clients import new_topic

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def client(kafka_bootstrap: str) -> Any:
    with WireClient(kafka_bootstrap) as wire:
        yield wire


@pytest.fixture
def topic(client: WireClient) -> str:
    name = new_topic("cfg")
    spec = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(timeout_ms=5000, validate_only=False, topics=[spec(
        name=name, num_partitions=1, replication_factor=1, assignments=[],
        configs=[spec.CreatableTopicConfig(name="retention.ms", value="1000")])])
    assert client.request(request, version=5).topics[0].error_code == ErrorCode.NONE
    return name


def describe(client: WireClient, resource_type: int, name: str, keys: list[str] | None = None,
             version: int = 4, synonyms: bool = False, docs: bool = False) -> Any:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[resource(resource_type=resource_type, resource_name=name,
                            configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=docs)
    [result] = client.request(request, version=version).results
    return result


def values(client: WireClient, topic: str) -> dict[str, str]:
    return {c.name: c.value for c in describe(client, TOPIC, topic).configs}


def alter(client: WireClient, resource_type: int, name: str, configs: dict[str, str | None],
          validate_only: bool = False) -> Any:
    resource = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest(validate_only=validate_only, resources=[resource(
        resource_type=resource_type, resource_name=name,
        configs=[resource.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    [response] = client.request(request, version=2).responses
    return response


def incremental(client: WireClient, topic: str, *ops: tuple[str, int, str | None],
                validate_only: bool = False) -> Any:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[resource(
        resource_type=TOPIC, resource_name=topic,
        configs=[resource.AlterableConfig(name=n, config_operation=op, value=v)
                 for n, op, v in ops])])
    [response] = client.request(request, version=1).responses
    return response


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_topic_config_is_described_in_every_version(
    client: WireClient, topic: str, version: int
) -> None:
    result = describe(client, TOPIC, topic, version=version)

    assert result.error_code == ErrorCode.NONE
    configs = {c.name: c for c in result.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["retention.ms"].value == "1000"
    if version == 0:
        assert not configs["retention.ms"].is_default
        assert configs["segment.ms"].is_default
    else:
        assert configs["retention.ms"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
        assert configs["segment.ms"].config_source == 5  # DEFAULT_CONFIG


def test_types_documentation_and_key_filter(client: WireClient, topic: str) -> None:
    result = describe(client, TOPIC, topic, keys=["cleanup.policy", "nope"], version=3,
                      docs=True)

    [config] = result.configs
    assert (config.name, config.config_type, config.read_only, config.is_sensitive) == \
        ("cleanup.policy", 7, False, False)  # LIST
    assert config.documentation


def test_an_empty_key_list_means_every_key(client: WireClient, topic: str) -> None:
    assert {c.name for c in describe(client, TOPIC, topic, keys=[]).configs} == \
        set(TOPIC_CONFIGS)


def test_broker_configs_are_all_there_read_only_unless_kafka_changes_them_live(
    client: WireClient,
) -> None:
    result = describe(client, BROKER, "1", synonyms=True)

    configs = {c.name: c for c in result.configs}
    # Kafka's internal keys are listed only where they are set.
    assert set(configs) == {name for name, key in BROKER_CONFIGS.items() if not key.internal}
    assert "producer.id.expiration.check.interval.ms" not in configs
    assert {c.name for c in configs.values() if not c.read_only} == DYNAMIC_BROKER_CONFIGS
    assert not configs["producer.id.expiration.ms"].read_only  # as a 4.0 broker reports it
    assert configs["transactional.id.expiration.ms"].read_only
    assert configs["listeners"].read_only and configs["node.id"].read_only
    assert not configs["compression.type"].read_only
    assert not configs["log.retention.hours"].read_only
    assert configs["group.initial.rebalance.delay.ms"].value == "0"  # the test broker's
    assert [(s.name, s.value, s.source) for s in
            configs["group.initial.rebalance.delay.ms"].synonyms] == [
        ("group.initial.rebalance.delay.ms", "0", 4),  # STATIC_BROKER_CONFIG
        ("group.initial.rebalance.delay.ms", "3000", 5),
    ]
    assert describe(client, BROKER, "").configs == []  # no dynamic cluster defaults


@pytest.mark.parametrize(("resource_type", "name", "code"), [
    (TOPIC, "no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (TOPIC, "bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
    (BROKER, "2", ErrorCode.INVALID_REQUEST),
    (BROKER, "one", ErrorCode.INVALID_REQUEST),
    (BROKER_LOGGER, "1", ErrorCode.INVALID_REQUEST),
])
def test_describe_errors(client: WireClient, resource_type: int, name: str,
                         code: ErrorCode) -> None:
    result = describe(client, resource_type, name)

    assert (result.error_code, result.configs) == (code, [])
    assert result.error_message


def test_alter_configs_replaces_the_whole_set(client: WireClient, topic: str) -> None:
    assert alter(client, TOPIC, topic, {"segment.ms": "60000"}).error_code == ErrorCode.NONE

    configs = values(client, topic)
    assert (configs["segment.ms"], configs["retention.ms"]) == ("60000", "604800000")


@pytest.mark.parametrize(("configs", "code"), [
    ({"retention.ms": "x"}, ErrorCode.INVALID_CONFIG),
    ({"no.such": "1"}, ErrorCode.INVALID_CONFIG),
    ({"cleanup.policy": "delete,shred"}, ErrorCode.INVALID_CONFIG),
    ({"retention.ms": None}, ErrorCode.INVALID_REQUEST),
])
def test_alter_configs_refuses_bad_values_and_changes_nothing(
    client: WireClient, topic: str, configs: dict[str, str | None], code: ErrorCode
) -> None:
    response = alter(client, TOPIC, topic, {"segment.ms": "60000", **configs})

    assert response.error_code == code
    assert values(client, topic)["segment.ms"] == "604800000"


def test_validate_only_alters_nothing(client: WireClient, topic: str) -> None:
    assert alter(client, TOPIC, topic, {}, validate_only=True).error_code == ErrorCode.NONE
    response = incremental(client, topic, ("retention.ms", SET, "5"), validate_only=True)
    assert response.error_code == ErrorCode.NONE

    assert values(client, topic)["retention.ms"] == "1000"


def test_static_broker_configs_cannot_be_altered(client: WireClient) -> None:
    response = alter(client, BROKER, "1", {"listeners": "PLAINTEXT://:1"})

    assert response.error_code == ErrorCode.INVALID_CONFIG
    assert response.error_message == "Cannot update these configs dynamically: listeners"
    assert alter(client, BROKER, "1", {}).error_code == ErrorCode.NONE
    assert alter(client, BROKER, "7", {}).error_code == ErrorCode.INVALID_REQUEST


def test_incremental_list_operations(client: WireClient, topic: str) -> None:
    assert incremental(client, topic, ("cleanup.policy", APPEND, "compact")).error_code == 0
    assert values(client, topic)["cleanup.policy"] == "delete,compact"
    assert incremental(client, topic, ("cleanup.policy", APPEND, "compact")).error_code == 0
    assert values(client, topic)["cleanup.policy"] == "delete,compact"  # no duplicates
    assert incremental(client, topic, ("cleanup.policy", SUBTRACT, "delete"),
                       ("retention.ms", DELETE, None)).error_code == 0
    configs = values(client, topic)
    assert (configs["cleanup.policy"], configs["retention.ms"]) == ("compact", "604800000")


@pytest.mark.parametrize(("op", "code", "message"), [
    (("retention.ms", APPEND, "1"), ErrorCode.INVALID_REQUEST,
     "Config value append is not allowed for config key: retention.ms"),
    (("retention.ms", 9, "1"), ErrorCode.INVALID_REQUEST,
     "Unknown config operation 9 for retention.ms"),
    (("no.such", SET, "1"), ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such"),
])
def test_incremental_errors(client: WireClient, topic: str, op: tuple[str, int, str],
                            code: ErrorCode, message: str) -> None:
    response = incremental(client, topic, op)

    assert (response.error_code, response.error_message) == (code, message)
