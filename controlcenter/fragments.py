"""The fragments each live event group pushes (events.register_fragment).

Each page that updates live registers here the element ids it renders with a fragment
template; the page includes the same template, so a push equals a reload. Contexts read the
read model only (models.py), never a broker. The app's `ready()` calls `register`, so every
process that renders pushes (the collector, the web workers) has them before its first push.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlcenter.events import register_fragment, register_rows
from controlcenter.models import ClusterState
from controlcenter.pages import brokers, groups, overview, topics
from controlcenter.streams import publish as streams_publish

FRAGMENT = "controlcenter/fragments/"


def cluster_health(key: str | None) -> Mapping[str, Any]:
    return {"cluster": ClusterState.current()}


def register() -> None:
    _register_cluster_pages()
    _register_group_pages()
    streams_publish.register()


# --- Cluster pages: overview, brokers, topics ------------------------------------------------
def _register_cluster_pages() -> None:
    register_fragment("overview", "cluster-health", FRAGMENT + "cluster_health.html",
                      cluster_health)
    for kind in ("overview", "brokers"):
        register_fragment(kind, "broker-table", FRAGMENT + "broker_table.html",
                          overview.brokers_context)
    register_fragment("overview", "groups-in-trouble", FRAGMENT + "groups_in_trouble.html",
                      overview.groups_in_trouble_context)
    register_fragment("overview", "busiest-topics", FRAGMENT + "busiest_topics.html",
                      overview.busiest_topics_context)
    register_fragment("brokers", "broker-controls", FRAGMENT + "broker_controls.html",
                      brokers.brokers_controls_context)
    register_fragment("broker", "broker-summary", FRAGMENT + "broker_summary.html",
                      brokers.broker_context)
    register_fragment("broker", "broker-process", FRAGMENT + "broker_process.html",
                      brokers.broker_context)
    for element_id, template in (("topic-summary", "topic_summary.html"),
                                 ("topic-map", "topic_map.html"),
                                 ("topic-partitions", "topic_partitions.html")):
        register_fragment("topic", element_id, FRAGMENT + template, topics.topic_context)
    register_fragment("topics", "topic-count", FRAGMENT + "topic_count.html", topics.topic_count)
    register_rows("topic", "topics", "topic-table", FRAGMENT + "topic_row.html",
                  topics.topic_rows)


# --- Consumer groups -------------------------------------------------------------------------
def _register_group_pages() -> None:
    register_fragment("groups", "group-table", FRAGMENT + "group_table.html",
                      groups.groups_context)
    for element_id, template in (("group-summary", "group_summary.html"),
                                 ("group-members", "group_members.html"),
                                 ("group-partitions", "group_partitions.html")):
        register_fragment("group", element_id, FRAGMENT + template, groups.group_context)
