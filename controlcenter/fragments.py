"""The fragments each live event group pushes (events.register_fragment).

Each page that updates live registers here the element ids it renders with a fragment
template; the page includes the same template, so a push equals a reload. Contexts read the
read model only (models.py), never a broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlcenter.events import register_fragment, register_rows
from controlcenter.models import ClusterState


def cluster_health(key: str | None) -> Mapping[str, Any]:
    return {"cluster": ClusterState.current()}


register_fragment("overview", "cluster-health", "controlcenter/fragments/cluster_health.html",
                  cluster_health)


# --- Cluster pages: overview, brokers, topics ------------------------------------------------
# Imported here, not at the top: the page modules import this package's views and forms.
def _register_cluster_pages() -> None:
    from controlcenter.pages import brokers, overview, topics

    fragment = "controlcenter/fragments/"
    for kind in ("overview", "brokers"):
        register_fragment(kind, "broker-table", fragment + "broker_table.html",
                          overview.brokers_context)
    register_fragment("overview", "groups-in-trouble", fragment + "groups_in_trouble.html",
                      overview.groups_in_trouble_context)
    register_fragment("overview", "busiest-topics", fragment + "busiest_topics.html",
                      overview.busiest_topics_context)
    register_fragment("broker", "broker-summary", fragment + "broker_summary.html",
                      brokers.broker_context)
    for element_id, template in (("topic-summary", "topic_summary.html"),
                                 ("topic-map", "topic_map.html"),
                                 ("topic-partitions", "topic_partitions.html")):
        register_fragment("topic", element_id, fragment + template, topics.topic_context)
    register_fragment("topics", "topic-count", fragment + "topic_count.html", topics.topic_count)
    register_rows("topic", "topics", "topic-table", fragment + "topic_row.html",
                  topics.topic_rows)


_register_cluster_pages()


# --- Consumer groups -------------------------------------------------------------------------
def _register_group_pages() -> None:
    from controlcenter.pages import groups

    fragment = "controlcenter/fragments/"
    register_fragment("groups", "group-table", fragment + "group_table.html",
                      groups.groups_context)
    for element_id, template in (("group-summary", "group_summary.html"),
                                 ("group-members", "group_members.html"),
                                 ("group-partitions", "group_partitions.html")):
        register_fragment("group", element_id, fragment + template, groups.group_context)


_register_group_pages()
