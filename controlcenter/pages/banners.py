"""The page-wide banners every cluster page shows, from the collector's ClusterState row.

Rendering never calls a broker, so an unreachable cluster costs a page nothing: the banner
says so (and since when), and the tables show the last snapshot the collector took.
"""

from __future__ import annotations

from dataclasses import dataclass

from controlcenter.models import ClusterState


@dataclass(frozen=True)
class Banner:
    key: str
    text: str
    level: str = "error"


def cluster_banners(cluster: ClusterState | None) -> list[Banner]:
    if cluster is None:
        return [Banner("cluster", "No snapshot of the cluster yet: the collector "
                                  "(manage.py collect) has not completed a cycle.", "warn")]
    if not cluster.reachable:
        since = (f" since {cluster.unreachable_since:%Y-%m-%d %H:%M:%S} UTC"
                 if cluster.unreachable_since else "")
        return [Banner("cluster", f"The cluster is unreachable{since}: {cluster.last_error} "
                                  "The pages show the last snapshot taken.")]
    return []
