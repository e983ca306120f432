"""Every state change the control center makes, as verb-first functions.

Each action checks nothing about HTTP (views, the JSON API and tasks check permissions and
parse input, then call it), performs the change through clusterclient, the built-in
cluster's supervisor client or the registry app, records an `AuditEntry` (who, what, when,
result) and then publishes an event so open pages show what happened. A refusal or a fault
raises `ActionError` carrying the system's own words (the Kafka error name and message,
the supervisor's refusal), which the caller shows as a form error.
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from brokercluster.client import ActionRefused, BrokerProcess, NoSupervisor
from clusterclient import (
    ClusterRequestError,
    ClusterUnavailable,
    ConfigChange,
    ConfigOperation,
    ResourceKind,
)
from clusterclient.elections import elect_preferred_leaders as elect
from clusterclient.metadata import TopicPartition
from clusterclient.records import ProducedRecord, produce
from controlcenter import connection, events, live
from controlcenter.audit import Actor, audited

logger = logging.getLogger(__name__)


class ActionError(Exception):
    """An action did not happen; `str()` is what the user reads."""

    def __init__(self, message: str, code_name: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code_name = code_name


@contextmanager
def _system_words() -> Iterator[None]:
    """The cluster's and supervisor's exceptions as ActionError, in their own words."""
    try:
        yield
    except ClusterRequestError as exc:
        raise ActionError(f"{exc.code_name}: {exc.message}", exc.code_name) from exc
    except ClusterUnavailable as exc:
        raise ActionError(f"The cluster did not answer: {exc.message}", "UNAVAILABLE") from exc
    except NoSupervisor as exc:
        raise ActionError(f"No cluster supervisor answers: {exc}", "NO_SUPERVISOR") from exc
    except ActionRefused as exc:
        raise ActionError(f"The supervisor refused: {exc}", "REFUSED") from exc
    except OSError as exc:
        raise ActionError(f"The supervisor did not answer: {exc}", "UNAVAILABLE") from exc


def _notify(groups: Sequence[tuple[str, str | None]], text: str) -> None:
    """Tell open pages what was done; the collector's next cycle pushes its effect."""
    message = json.dumps(live.banner("action", text, level="info"))
    for kind, key in groups:
        try:
            events.publish(events.group_name(kind, key), message)
        except Exception:  # a live push is a courtesy: the change itself is done
            logger.warning("could not publish %r to %s.%s", text, kind, key, exc_info=True)


# --- Cluster pages: topics, messages, brokers ------------------------------------------------


def create_topic(actor: Actor, name: str, partitions: int | None = None,
                 replication_factor: int | None = None,
                 configs: Mapping[str, str] | None = None) -> None:
    """Create a topic; None takes the broker's num.partitions / default.replication.factor."""
    parameters = {"partitions": partitions, "replication_factor": replication_factor,
                  "configs": dict(configs or {})}
    with audited(actor, "topic.create", f"topic {name}", parameters) as note, _system_words():
        connection.cluster().create_topic(name, partitions or -1, replication_factor or -1,
                                           configs)
        note.message = "created"
    _notify([("topics", None), ("overview", None)], f"Topic {name} was created.")


def delete_topic(actor: Actor, name: str) -> None:
    with audited(actor, "topic.delete", f"topic {name}") as note, _system_words():
        connection.cluster().delete_topic(name)
        note.message = "deleted"
    _notify([("topics", None), ("topic", name), ("overview", None)],
            f"Topic {name} was deleted.")


def set_topic_config(actor: Actor, topic: str, name: str, value: str) -> None:
    """Set one topic config (IncrementalAlterConfigs SET): the broker validates it."""
    with audited(actor, "topic.config.set", f"topic {topic}", {name: value}) as note, \
            _system_words():
        connection.cluster().incremental_alter_configs(
            ResourceKind.TOPIC, topic, [ConfigChange(name, value, ConfigOperation.SET)])
        note.message = f"{name} = {value}"
    _notify([("topic", topic)], f"{topic}: {name} set to {value}.")


def reset_topic_config(actor: Actor, topic: str, name: str) -> None:
    """Remove a topic override (IncrementalAlterConfigs DELETE): back to the broker default."""
    with audited(actor, "topic.config.reset", f"topic {topic}", {"config": name}) as note, \
            _system_words():
        connection.cluster().incremental_alter_configs(
            ResourceKind.TOPIC, topic, [ConfigChange(name, None, ConfigOperation.DELETE)])
        note.message = f"{name} reset to its default"
    _notify([("topic", topic)], f"{topic}: {name} reset to its default.")


def produce_message(actor: Actor, topic: str, value: bytes | None, key: bytes | None = None,
                    headers: Sequence[tuple[str, bytes]] = (), partition: int | None = None,
                    schema_id: int | None = None) -> ProducedRecord:
    """Produce one record (acks=all). The audit entry names where it went, not its bytes."""
    parameters = {"partition": partition, "headers": [k for k, _ in headers],
                  "bytes": len(value or b""), "schema_id": schema_id}
    with audited(actor, "topic.produce", f"topic {topic}", parameters) as note, \
            _system_words():
        produced = produce(connection.bootstrap_servers(), topic, value, key, list(headers),
                           partition, timeout=connection.TIMEOUT)
        note.message = f"partition {produced.partition} offset {produced.offset}"
    return produced


class BrokerCommand(enum.StrEnum):
    """What the Brokers page may ask the built-in cluster's supervisor to do."""

    STOP = "stop"  # SIGTERM: a controlled shutdown
    KILL = "kill"  # SIGKILL: a crash, as a failover drill
    START = "start"
    RESTART = "restart"


def operate_broker(actor: Actor, node_id: int, command: BrokerCommand) -> BrokerProcess:
    """Stop, kill, start or restart one broker of the built-in cluster."""
    supervisor = connection.supervisor()
    with audited(actor, f"broker.{command.value}", f"broker {node_id}") as note, \
            _system_words():
        if supervisor is None:
            raise NoSupervisor("the platform watches an external cluster")
        process = getattr(supervisor, command.value)(node_id)
        note.message = process.state_text
    _notify([("brokers", None), ("broker", str(node_id)), ("overview", None)],
            f"Broker {node_id}: {command.value} done, now {process.state_text}.")
    return process  # type: ignore[no-any-return]


def elect_preferred_leaders(actor: Actor, topic: str | None = None) -> int:
    """Give every partition of `topic` (None: of the cluster) its preferred leader back;
    returns how many partitions the cluster could not move (e.g. its preferred replica is
    down or out of the ISR), which is not a failure of the request."""
    target = f"topic {topic}" if topic else "cluster"
    with audited(actor, "partitions.elect_preferred", target) as note, _system_words():
        cluster = connection.cluster()
        partitions = None if topic is None else [
            TopicPartition(topic, p.partition) for p in cluster.topic(topic).partitions]
        outcome = elect(cluster, partitions)
        refused = [tp for tp, problem in outcome.items() if problem is not None]
        note.message = f"{len(outcome) - len(refused)} of {len(outcome)} led by their " \
                       f"preferred replica"
    groups: list[tuple[str, str | None]] = [("brokers", None), ("overview", None)]
    _notify(groups + ([("topic", topic)] if topic else []),
            f"Preferred leader election on the {target}: {note.message}.")
    return len(refused)
