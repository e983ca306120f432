"""What every connector's configuration holds besides its own keys (Kafka's ConnectorConfig,
SinkConnectorConfig, SourceConnectorConfig), and validation into Kafka's `ConfigInfos`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from connect.api import Connector, SinkConnector
from connect.configdef import (
    NO_DEFAULT,
    ConfigDef,
    ConfigException,
    ConfigValue,
    Importance,
    Type,
    at_least,
    non_empty_string,
    one_of,
)
from connect.converters import converter_class
from connect.plugins import Plugins, class_name

COMMON, ERRORS, EOS = "Common", "Error Handling", "Exactly Once Support"


def _converter(name: str, value: Any) -> None:
    if value is not None:
        converter_class(str(value))


def common_def() -> ConfigDef:
    d = ConfigDef()
    d.define("name", Type.STRING, NO_DEFAULT, Importance.HIGH,
             "Globally unique name to use for this connector.", group=COMMON, order=1,
             validator=non_empty_string)
    d.define("connector.class", Type.STRING, NO_DEFAULT, Importance.HIGH,
             "Name or alias of the class for this connector.", group=COMMON, order=2)
    d.define("tasks.max", Type.INT, 1, Importance.HIGH,
             "Maximum number of tasks to use for this connector.", group=COMMON, order=3,
             validator=at_least(1))
    for order, key in enumerate(("key.converter", "value.converter", "header.converter"), 4):
        d.define(key, Type.CLASS, None, Importance.LOW,
                 f"The {key.split('.')[0]} converter; the worker's when not set.",
                 group=COMMON, order=order, validator=_converter)
    d.define("errors.tolerance", Type.STRING, "none", Importance.MEDIUM,
             "'none' fails the task on the first error; 'all' skips problematic records.",
             group=ERRORS, order=1, validator=one_of("none", "all"))
    d.define("errors.log.enable", Type.BOOLEAN, False, Importance.MEDIUM,
             "Log each error and failed operation.", group=ERRORS, order=2)
    return d


def sink_def() -> ConfigDef:
    d = ConfigDef()
    d.define("topics", Type.LIST, "", Importance.HIGH,
             "List of topics to consume, separated by commas", group=COMMON, order=4)
    d.define("topics.regex", Type.STRING, "", Importance.HIGH,
             "Regular expression giving topics to consume.", group=COMMON, order=4)
    d.define("errors.deadletterqueue.topic.name", Type.STRING, "", Importance.MEDIUM,
             "The topic that records failing conversion go to; empty: no dead letter queue.",
             group=ERRORS, order=3)
    d.define("errors.deadletterqueue.topic.replication.factor", Type.SHORT, 3,
             Importance.MEDIUM, "Replication factor of the dead letter queue topic.",
             group=ERRORS, order=4)
    d.define("errors.deadletterqueue.context.headers.enable", Type.BOOLEAN, False,
             Importance.MEDIUM, "Add headers with the error's context to DLQ records.",
             group=ERRORS, order=5)
    return d


def source_def() -> ConfigDef:
    d = ConfigDef()
    d.define("exactly.once.support", Type.STRING, "requested", Importance.MEDIUM,
             "'required' refuses the connector unless it declares exactly-once support.",
             group=EOS, order=1, validator=one_of("requested", "required"))
    d.define("transaction.boundary", Type.STRING, "poll", Importance.MEDIUM,
             "Where transactions end: 'poll' (each batch a task returns).", group=EOS,
             order=2, validator=one_of("poll"))
    return d


def _sink_topics(props: Mapping[str, str], values: dict[str, ConfigValue]) -> None:
    topics, regex = props.get("topics", "").strip(), props.get("topics.regex", "").strip()
    if bool(topics) == bool(regex):
        message = ("Must configure one of topics or topics.regex" if not topics else
                   "topics and topics.regex are mutually exclusive options, but both are set.")
        values["topics"].errors.append(message)
        values["topics.regex"].errors.append(message)
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            values["topics.regex"].errors.append(f"Invalid regex: {exc}")


def _exactly_once(connector: Connector, props: Mapping[str, str],
                  values: dict[str, ConfigValue]) -> None:
    from connect.api import SourceConnector
    if (isinstance(connector, SourceConnector)
            and props.get("exactly.once.support") == "required"
            and connector.exactly_once_support(props) is not True):
        values["exactly.once.support"].errors.append(
            "The connector does not implement the API required for exactly-once support")


def validate(plugins: Plugins, props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka's ConfigInfos for `props`: name, error_count, groups, configs."""
    common = common_def()
    name = props.get("connector.class", "")
    try:
        cls = plugins.find(name)
    except ConfigException as exc:
        values = common.validate(props)
        values["connector.class"].errors.append(str(exc))
        return _infos(name, common, values)
    connector = cls()
    extra = sink_def() if issubclass(cls, SinkConnector) else source_def()
    framework = common.merged(extra)
    values = framework.validate(props)
    if issubclass(cls, SinkConnector):
        _sink_topics(props, values)
    _exactly_once(connector, props, values)
    own = connector.config()
    own_values = connector.validate(props)
    return _infos(class_name(cls), framework.merged(own), {**values, **own_values})


def _infos(name: str, definition: ConfigDef, values: dict[str, ConfigValue]) -> dict[str, Any]:
    configs = [{"definition": key.definition(), "value": values[key.name].info()}
               for key in definition.keys.values() if key.name in values]
    return {"name": name, "error_count": sum(len(v.errors) for v in values.values()),
            "groups": definition.groups(), "configs": configs}


def errors_of(infos: dict[str, Any]) -> list[str]:
    return [f"{c['value']['name']}: {e}" for c in infos["configs"] for e in c["value"]["errors"]]
