"""The Brokers page: every broker from the collector's tables, one broker's detail with its
configs (and their sources), and, for the built-in cluster, stop / kill / start / restart.

The process controls post to `broker_command`, which calls `actions.operate_broker`; the
collector's next cycle pushes the new leadership and ISR to every open page (`brokers`,
`broker.<id>`, `overview` and `topic.<name>` groups), so a user watches the failover live.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET

from clusterclient import ClusterRequestError, ClusterUnavailable, ConfigEntry
from controlcenter import actions, connection
from controlcenter.access import Capability, requires
from controlcenter.models import BrokerState, ClusterState, PartitionState
from controlcenter.pages.banners import cluster_banners

LEADS_SHOWN = 200


@require_GET
def brokers(request: HttpRequest) -> HttpResponse:
    cluster = ClusterState.current()
    rows = list(BrokerState.objects.all())
    context = {"cluster": cluster, "banners": cluster_banners(cluster), "brokers": rows,
               "supervised": any(b.process_state is not None for b in rows),
               "commands": list(actions.BrokerCommand)}
    return render(request, "controlcenter/brokers.html", context)


@require_GET
def broker(request: HttpRequest, node_id: int) -> HttpResponse:
    cluster = ClusterState.current()
    row = BrokerState.objects.filter(node_id=node_id).first()
    if row is None:
        raise Http404(f"No broker {node_id} in the collector's snapshot.")
    configs, configs_error = broker_configs(row)
    led = PartitionState.objects.filter(leader=node_id).order_by("topic", "partition")
    context = {"cluster": cluster, "banners": cluster_banners(cluster), "broker": row,
               "configs": configs, "configs_error": configs_error,
               "led": list(led[:LEADS_SHOWN]), "led_total": led.count(),
               "commands": list(actions.BrokerCommand)}
    return render(request, "controlcenter/broker.html", context)


def broker_context(key: str | None) -> Mapping[str, Any]:
    """What the broker page's live summary and commands show (its key is the node id)."""
    return {"broker": BrokerState.objects.filter(node_id=int(key or -1)).first(),
            "commands": list(actions.BrokerCommand)}


def brokers_controls_context(key: str | None) -> Mapping[str, Any]:
    """The Brokers page's process controls: each broker's commands for its process state."""
    return {"brokers": list(BrokerState.objects.all()), "commands": list(actions.BrokerCommand)}


def broker_configs(row: BrokerState) -> tuple[list[ConfigEntry], str]:
    """The broker's configs, asked on demand (the collector does not sample them)."""
    if row.status == "down":
        return [], f"Broker {row.node_id} is down: its configs cannot be read."
    try:
        return overrides_first(connection.cluster().broker_configs(row.node_id)), ""
    except ClusterRequestError as exc:
        return [], f"{exc.code_name}: {exc.message}"
    except ClusterUnavailable as exc:
        return [], f"The broker did not answer: {exc.message}"


def back_to(request: HttpRequest, default: str) -> str:
    """The page the form was on (its `next` field) when it is one of ours, else `default`."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                   require_https=request.is_secure()):
        return target
    return reverse(default)


def overrides_first(configs: list[ConfigEntry]) -> list[ConfigEntry]:
    """What someone set (any source but the default) before the defaults, each by name."""
    return sorted(configs, key=lambda c: (c.source == "DEFAULT_CONFIG", c.name))


@requires(Capability.OPERATE_CLUSTER)
def broker_command(request: HttpRequest, node_id: int, command: str) -> HttpResponse:
    try:
        chosen = actions.BrokerCommand(command)
    except ValueError as exc:
        raise Http404(f"No broker command {command!r}.") from exc
    try:
        process = actions.operate_broker(request, node_id, chosen)
    except actions.ActionError as exc:
        messages.error(request, f"Broker {node_id}: {chosen.value} failed. {exc}")
    else:
        messages.success(request, f"Broker {node_id}: {chosen.value} done, now "
                                  f"{process.state_text}. Leadership and ISR update live.")
    return redirect(back_to(request, "brokers"))


@requires(Capability.OPERATE_CLUSTER)
def elect_leaders(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """Preferred-leader election for one topic or (name None) for the whole cluster."""
    try:
        refused = actions.elect_preferred_leaders(request, name)
    except actions.ActionError as exc:
        messages.error(request, f"Preferred leader election failed. {exc}")
    else:
        where = f"topic {name}" if name else "every topic"
        left = f" {refused} partitions could not move yet (preferred replica not in sync)." \
            if refused else ""
        messages.success(request, f"Preferred leaders elected on {where}.{left} "
                                  "The leadership map updates live.")
    return redirect(back_to(request, "brokers"))
