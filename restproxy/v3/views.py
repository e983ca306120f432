"""v3 clusters, brokers, topics, topic configs and partitions."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.response import Response

from clusterclient import ClusterMetadata, ClusterUnavailable, PartitionMetadata
from clusterclient.clusters import KafkaCluster, from_settings
from restproxy import actions, client, errors
from restproxy.api import V3View, json_object, need_thread, parse_json, read_body, selected
from restproxy.client import as_proxy, cluster

from . import resources
from .resources import Links

log = logging.getLogger(__name__)
# How long another cluster has to say its id before it is left out of the answer (s)
ID_PROBE_TIMEOUT = 3.0
# ... and how long one that did not answer is left out without asking it again (s)
UNANSWERED_S = 10.0
_unanswered: dict[str, float] = {}  # cluster name -> until when


def read_v3_json(request: Request) -> Any:
    return parse_json(read_body(request))


class ClusterView(V3View):
    """Base of every view under /v3/clusters/{cluster_id}: the request acts on the configured
    cluster with that id (client.selected), Confluent's 404 for any other id."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        wanted = kwargs.get("cluster_id")
        cluster_id = _default_cluster_id()
        if wanted is not None and wanted != cluster_id:
            chosen = next((c for c, cid in _other_cluster_ids() if cid == wanted), None)
            if chosen is None:
                raise errors.cluster_not_found(wanted)
            selected.set(chosen)
            cluster_id = wanted
        self.links = Links(request, cluster_id)


def _cluster_id(metadata: ClusterMetadata | None) -> str:
    return (metadata.cluster_id if metadata is not None else None) or "millrace"


def _default_cluster_id() -> str:
    selected.set(None)
    metadata = cluster().cached_metadata()
    if metadata is None:
        need_thread()  # a refresh blocks: not on the event loop
        metadata = cluster().metadata()
    return _cluster_id(metadata)


def _other_cluster_ids() -> Iterator[tuple[KafkaCluster, str]]:
    """The other configured clusters that answer, with their ids (a cluster that does not
    answer is left out: its id cannot be known). Asked as the proxy (client.as_proxy): the
    request itself then reaches the cluster as the caller."""
    for other in from_settings(settings)[1:]:
        if _unanswered.get(other.name, 0.0) > time.monotonic():
            continue
        selected.set(other)
        with as_proxy():
            metadata = cluster().cached_metadata()
        if metadata is None:
            need_thread()
            try:  # a short probe: a cluster that is down must not hold up the others
                with as_proxy():
                    metadata = cluster().metadata(timeout=ID_PROBE_TIMEOUT)
            except ClusterUnavailable:
                log.warning("cluster %s (%s) does not answer", other.name,
                            other.bootstrap_servers)
                _unanswered[other.name] = time.monotonic() + UNANSWERED_S
                continue
            finally:
                selected.set(None)
        yield other, _cluster_id(metadata)
    selected.set(None)


class ClusterListView(ClusterView):
    def get(self, request: Request) -> Response:
        metadata = cluster().metadata(refresh=True)
        data = [resources.cluster(self.links, metadata.controller_id)]
        for other, cluster_id in list(_other_cluster_ids()):
            selected.set(other)
            with as_proxy():
                controller = cluster().metadata().controller_id
            data.append(resources.cluster(Links(request, cluster_id), controller))
        selected.set(None)
        return Response({"kind": "KafkaClusterList",
                         "metadata": {"self": self.links.base, "next": None}, "data": data})


class ClusterDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str) -> Response:
        metadata = cluster().metadata(refresh=True)
        return Response(resources.cluster(self.links, metadata.controller_id))


class BrokerListView(ClusterView):
    def get(self, request: Request, cluster_id: str) -> Response:
        brokers = cluster().metadata(refresh=True).brokers
        data = [resources.broker(self.links, b.node_id, b.host, b.port) for b in brokers]
        return Response(self.links.collection("KafkaBrokerList", ("brokers",), data))


def _broker_id(raw: str) -> int:
    broker = cluster().metadata().broker(int(raw)) if raw.isdigit() else None
    if broker is None:
        raise errors.broker_not_found(raw)
    return int(raw)


class BrokerDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, broker_id: str) -> Response:
        b = cluster().metadata().broker(_broker_id(broker_id))
        assert b is not None
        return Response(resources.broker(self.links, b.node_id, b.host, b.port))


class BrokerConfigListView(ClusterView):
    def get(self, request: Request, cluster_id: str, broker_id: str) -> Response:
        number = _broker_id(broker_id)
        data = [resources.config(self.links, e, ("broker", number))
                for e in cluster().broker_configs(number)]
        return Response(self.links.collection(
            "KafkaBrokerConfigList", ("brokers", number, "configs"), data))


class BrokerConfigDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, broker_id: str, name: str) -> Response:
        number = _broker_id(broker_id)
        for entry in cluster().broker_configs(number):
            if entry.name == name:
                return Response(resources.config(self.links, entry, ("broker", number)))
        raise errors.config_not_found(name)


class TopicListView(ClusterView):
    def get(self, request: Request, cluster_id: str) -> Response:
        topics = cluster().metadata(refresh=True).topics
        data = [resources.topic(self.links, t) for t in topics.values()]
        return Response(self.links.collection("KafkaTopicList", ("topics",), data))

    def post(self, request: Request, cluster_id: str) -> Response:
        body = json_object(read_v3_json(request))
        name = actions.create_topic(body)
        if body.get("validate_only"):
            partitions = int(body.get("partitions_count", 1))
            return Response(self.links.resource(
                "KafkaTopic", ("topics", name), (("topic", name),), topic_name=name,
                is_internal=False, replication_factor=int(body.get("replication_factor", 1)),
                partitions_count=partitions, configs=self.links.related("topics", name, "configs"),
                partitions=self.links.related("topics", name, "partitions"),
                authorized_operations=[]), status=201)
        body = resources.topic(self.links, client.topic(name))
        shortfall = client.acks_all_shortfall(name)
        if shortfall is not None:  # accepted, as Kafka does; but say what writers will meet
            body["warnings"] = [shortfall.message]
        return Response(body, status=201)


class TopicDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, topic: str) -> Response:
        return Response(resources.topic(self.links, client.topic(topic)))

    def delete(self, request: Request, cluster_id: str, topic: str) -> Response:
        actions.delete_topic(topic)
        return Response(status=204)

    def patch(self, request: Request, cluster_id: str, topic: str) -> Response:
        body = json_object(read_v3_json(request))
        count = body.get("partitions_count")
        if not isinstance(count, int):
            raise errors.bad_request("partitions_count must be an integer")
        actions.set_partition_count(topic, count)
        return Response(resources.topic(self.links, client.topic(topic)))


class TopicConfigListView(ClusterView):
    def get(self, request: Request, cluster_id: str, topic: str) -> Response:
        client.topic(topic)
        data = [resources.config(self.links, e, ("topic", topic))
                for e in cluster().topic_configs(topic)]
        return Response(self.links.collection(
            "KafkaTopicConfigList", ("topics", topic, "configs"), data))


class TopicConfigAlterView(ClusterView):
    def post(self, request: Request, cluster_id: str, topic: str) -> Response:
        body = json_object(read_v3_json(request))
        changes = body.get("data")
        if not isinstance(changes, list):
            raise errors.bad_request("data must be a list of config changes")
        actions.alter_topic_configs(topic, changes, bool(body.get("validate_only")))
        return Response(status=204)


class TopicConfigDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, topic: str, name: str) -> Response:
        client.topic(topic)
        for entry in cluster().topic_configs(topic):
            if entry.name == name:
                return Response(resources.config(self.links, entry, ("topic", topic)))
        raise errors.config_not_found(name)

    def put(self, request: Request, cluster_id: str, topic: str, name: str) -> Response:
        body = json_object(read_v3_json(request))
        actions.alter_topic_configs(topic, [{"name": name, "value": body.get("value")}])
        return Response(status=204)

    def delete(self, request: Request, cluster_id: str, topic: str, name: str) -> Response:
        actions.alter_topic_configs(topic, [{"name": name, "operation": "DELETE"}])
        return Response(status=204)


def _partition(topic: str, raw: str) -> PartitionMetadata:
    metadata = client.topic(topic)
    number = int(raw) if raw.lstrip("-").isdigit() else None
    found = None if number is None else metadata.partition(number)
    if found is None:
        raise errors.partition_not_found(raw)
    return found


class PartitionListView(ClusterView):
    def get(self, request: Request, cluster_id: str, topic: str) -> Response:
        partitions = client.topic(topic).partitions
        data = [resources.partition(self.links, topic, p) for p in partitions]
        return Response(self.links.collection(
            "KafkaPartitionList", ("topics", topic, "partitions"), data))


class PartitionDetailView(ClusterView):
    def get(self, request: Request, cluster_id: str, topic: str, partition: str) -> Response:
        return Response(resources.partition(self.links, topic, _partition(topic, partition)))


class ReplicaListView(ClusterView):
    def get(self, request: Request, cluster_id: str, topic: str, partition: str) -> Response:
        p = _partition(topic, partition)
        data = [resources.replica(self.links, topic, p, b) for b in p.replicas]
        return Response(self.links.collection(
            "KafkaReplicaList", ("topics", topic, "partitions", p.partition, "replicas"), data))


