"""Which cluster's rows a list page shows: the analyses and the audit log keep every
cluster's rows in one table (each row names its cluster), and show the current cluster's
unless the URL asks for every cluster's (`?cluster=all`, `clusters.listed`)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest

from controlcenter import clusters


def shown_cluster(request: HttpRequest) -> str | None:
    """The cluster whose rows the page lists (None: every cluster's). A name no configured
    cluster has lists the current cluster's rows, and the page says so."""
    try:
        return clusters.listed(request.GET.get("cluster"))
    except clusters.UnknownCluster as exc:
        messages.error(request, f"{exc} Showing {clusters.current_name()}'s.")
        return clusters.current_name()


def of_cluster(rows: QuerySet[Any], shown: str | None) -> QuerySet[Any]:
    return rows if shown is None else rows.filter(cluster=shown)


def context(shown: str | None) -> dict[str, Any]:
    """What the page's cluster line (components/cluster_scope.html) needs."""
    return {"shown_cluster": shown, "current_cluster": clusters.current_name(),
            "all_clusters": clusters.ALL}
