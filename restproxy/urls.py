"""Routes of the Confluent REST Proxy API: v2 at the root, v3 under v3/clusters/{id}.

Every pattern tolerates a trailing slash. How views are served: api.py.
"""

from __future__ import annotations

from typing import Any

from django.urls import URLPattern, URLResolver, re_path

from .api import as_proxy_view
from .instances import stream
from .instances import views as c
from .v2 import views as v2
from .v3.urls import v3_patterns

app_name = "restproxy"

T = r"(?P<topic>[^/]+)"
P = r"(?P<partition>[^/]+)"
INSTANCE = r"consumers/(?P<group>[^/]+)/instances/(?P<instance>[^/]+)"


def route(pattern: str, view: Any, name: str | None = None, **initkwargs: Any) -> URLPattern:
    return re_path(rf"^{pattern}/?$", as_proxy_view(view, **initkwargs), name=name)


urlpatterns: list[URLPattern | URLResolver] = [
    re_path(r"^$", as_proxy_view(v2.RootView), name="root"),
    route("topics", v2.TopicListView),
    route(f"topics/{T}", v2.TopicView),
    route(f"topics/{T}/partitions", v2.PartitionListView),
    route(f"topics/{T}/partitions/{P}", v2.PartitionView),
    route(f"topics/{T}/partitions/{P}/offsets", v2.PartitionOffsetsView),
    route("brokers", v2.BrokerListView),
    route(r"consumers/(?P<group>[^/]+)", c.CreateConsumerView),
    route(INSTANCE, c.InstanceDeleteView, name="v2-instance"),
    route(f"{INSTANCE}/subscription", c.SubscriptionView),
    route(f"{INSTANCE}/assignments", c.AssignmentsView),
    route(f"{INSTANCE}/positions", c.PositionsView),
    route(f"{INSTANCE}/positions/beginning", c.PositionsEdgeView, beginning=True),
    route(f"{INSTANCE}/positions/end", c.PositionsEdgeView, beginning=False),
    route(f"{INSTANCE}/records", c.RecordsView),
    route(f"{INSTANCE}/records/stream", stream.RecordStreamView),
    route(f"{INSTANCE}/offsets", c.OffsetsView),
    *v3_patterns(route),
]
