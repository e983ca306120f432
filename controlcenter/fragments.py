"""The fragments each live event group pushes (events.register_fragment).

Each page that updates live registers here the element ids it renders with a fragment
template; the page includes the same template, so a push equals a reload. Contexts read the
read model only (models.py), never a broker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controlcenter.events import register_fragment
from controlcenter.models import ClusterState


def cluster_health(key: str | None) -> Mapping[str, Any]:
    return {"cluster": ClusterState.current()}


register_fragment("overview", "cluster-health", "controlcenter/fragments/cluster_health.html",
                  cluster_health)
