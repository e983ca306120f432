"""The Kafka Connect pages: the connectors with their tasks, states and throughput; one
connector (config, tasks with their stack traces, KIP-875 offsets); a plugin's create
form, built from the worker's `/connector-plugins/{plugin}/config/validate` answer and
showing its errors per field; pause, resume, restart and delete through `actions`.

Everything is read from the worker's REST API at MILLRACE_CONNECT_URL when the page is
rendered (connectapi.py, bounded by its timeout): Connect keeps its state in its own
topics, and the collector does not sample it. A worker that does not answer turns the
page into a note saying so. Status and throughput are pushed over the page's websocket
when they change (connectwatch.py reads the worker every second for all open pages of the
process); `?fragment=1` renders the same fragment alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from controlcenter import actions, connectapi
from controlcenter.access import Capability, requires

NAME = re.compile(r"^[^/\\]{1,249}$")


@dataclass
class TaskRow:
    id: int
    state: str
    worker_id: str
    trace: str = ""
    records_total: int | None = None
    records_per_second: float | None = None


@dataclass
class ConnectorRow:
    name: str
    type: str
    connector_class: str
    state: str
    worker_id: str
    trace: str = ""
    tasks: list[TaskRow] = field(default_factory=list)

    @property
    def records_per_second(self) -> float | None:
        rates = [t.records_per_second for t in self.tasks if t.records_per_second is not None]
        return round(sum(rates), 2) if rates else None

    @property
    def records_total(self) -> int | None:
        totals = [t.records_total for t in self.tasks if t.records_total is not None]
        return sum(totals) if totals else None

    @property
    def failed(self) -> bool:
        return self.state == "FAILED" or any(t.state == "FAILED" for t in self.tasks)


def _row(name: str, entry: Mapping[str, Any],
         rates: Mapping[tuple[str, int], connectapi.Throughput]) -> ConnectorRow:
    status, info = entry.get("status") or {}, entry.get("info") or {}
    connector = status.get("connector") or {}
    row = ConnectorRow(name, str(info.get("type") or status.get("type") or ""),
                       str((info.get("config") or {}).get("connector.class", "")),
                       str(connector.get("state", "UNASSIGNED")),
                       str(connector.get("worker_id", "")), str(connector.get("trace", "")))
    for task in sorted(status.get("tasks") or [], key=lambda t: int(t["id"])):
        rate = rates.get((name, int(task["id"])))
        row.tasks.append(TaskRow(int(task["id"]), str(task["state"]),
                                 str(task.get("worker_id", "")), str(task.get("trace", "")),
                                 rate.records_total if rate else None,
                                 rate.records_per_second if rate else None))
    return row


def _workers(entries: Mapping[str, Mapping[str, Any]]) -> set[str]:
    return {str(t["worker_id"]) for e in entries.values()
            for t in (e.get("status") or {}).get("tasks") or [] if t.get("worker_id")}


def _reading(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`read()`'s context, or the note that says why Connect could not be read."""
    try:
        return read()
    except connectapi.ConnectUnavailable as exc:
        return {"unreachable": str(exc)}
    except connectapi.ConnectError as exc:
        return {"refused": exc.message, "status": exc.status}


def connectors_context() -> dict[str, Any]:
    def read() -> dict[str, Any]:
        entries = connectapi.connectors()
        rates = connectapi.throughput(_workers(entries))
        return {"connectors": [_row(n, e, rates) for n, e in sorted(entries.items())]}
    return {"connect_url": connectapi.url(), **_reading(read)}


@require_GET
def connect(request: HttpRequest) -> HttpResponse:
    context = connectors_context()
    if request.GET.get("fragment"):
        return render(request, "controlcenter/fragments/connect_table.html", context)
    return render(request, "controlcenter/connect.html", context)


# --- one connector --------------------------------------------------------------------------


def connector_context(name: str) -> dict[str, Any]:
    def read() -> dict[str, Any]:
        found = connectapi.connector(name)
        rates = connectapi.throughput(_workers({name: found}))
        context = {"connector": _row(name, found, rates), "config": found["info"]["config"]}
        try:
            context["offsets"] = [{k: json.dumps(v, sort_keys=True) for k, v in o.items()}
                                  for o in connectapi.offsets(name)]
        except connectapi.ConnectError as exc:  # e.g. a connector still starting
            context["offsets_error"] = exc.message
        return context
    return {"name": name, "connect_url": connectapi.url(), **_reading(read)}


@require_GET
def connector(request: HttpRequest, name: str) -> HttpResponse:
    context = connector_context(name)
    if context.get("status") == 404:
        raise Http404(context["refused"])
    template = ("controlcenter/fragments/connector_status.html" if request.GET.get("fragment")
                else "controlcenter/connector.html")
    return render(request, template, context)


@requires(Capability.CHANGE_CONNECTORS)
def connector_command(request: HttpRequest, name: str, command: str) -> HttpResponse:
    try:
        operation = actions.ConnectorCommand(command)
    except ValueError as exc:
        raise Http404(f"no command {command}") from exc
    try:
        actions.operate_connector(request, name, operation)
    except actions.ActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"{operation.value.capitalize()} sent to {name}.")
    if operation is actions.ConnectorCommand.DELETE:
        return redirect("connect")
    return redirect("connector", name=name)


# --- create from a plugin's validated form --------------------------------------------------


@dataclass
class FormField:
    name: str
    label: str
    type: str
    required: bool
    value: str
    documentation: str
    errors: list[str]
    recommended: list[str]
    group: str


def form_fields(infos: Mapping[str, Any]) -> list[FormField]:
    """Kafka's ConfigInfos as form fields, in the groups' order and each group's order."""
    groups = list(infos.get("groups") or [])
    fields = []
    for config in infos.get("configs") or []:
        definition, value = config["definition"], config["value"]
        if not value.get("visible", True):
            continue
        current = value.get("value")
        fields.append(FormField(
            definition["name"], definition.get("display_name") or definition["name"],
            str(definition.get("type", "STRING")), bool(definition.get("required")),
            "" if current is None else str(current), str(definition.get("documentation") or ""),
            list(value.get("errors") or []), [str(v) for v in value.get("recommended_values")
                                              or []],
            str(definition.get("group") or "")))
    order = {g: i for i, g in enumerate(groups)}
    return sorted(fields, key=lambda f: order.get(f.group, len(order)))


def _submitted(request: HttpRequest, plugin: str) -> dict[str, str]:
    """The form's non-empty fields (an empty one takes the definition's default)."""
    config = {k[len("config."):]: str(v).strip() for k, v in request.POST.items()
              if k.startswith("config.") and str(v).strip()}
    config["connector.class"] = plugin
    return config


@require_GET
def connector_new(request: HttpRequest) -> HttpResponse:
    plugin = request.GET.get("plugin", "")
    context: dict[str, Any] = {"connect_url": connectapi.url(), "plugin": plugin}
    if not plugin:
        context.update(_reading(lambda: {"plugins": connectapi.plugins()}))
        return render(request, "controlcenter/connector_new.html", context)
    context.update(_reading(lambda: {"fields": form_fields(connectapi.validate(
        plugin, {"connector.class": plugin}))}))
    if "fields" in context:  # the first look: no errors for what is not filled in yet
        for f in context["fields"]:
            f.errors = []
    return render(request, "controlcenter/connector_new.html", context)


@requires(Capability.CHANGE_CONNECTORS)
def connector_create(request: HttpRequest) -> HttpResponse:
    plugin = request.POST.get("plugin", "")
    config = _submitted(request, plugin)
    context: dict[str, Any] = {"connect_url": connectapi.url(), "plugin": plugin}
    try:
        infos = connectapi.validate(plugin, config)
    except (connectapi.ConnectUnavailable, connectapi.ConnectError) as exc:
        context["error"] = str(exc)
        return render(request, "controlcenter/connector_new.html", context, status=400)
    fields = form_fields(infos)
    for f in fields:
        if f.name in config:
            f.value = config[f.name]
    context["fields"] = fields
    if infos.get("error_count"):
        context["error"] = (f"The worker found {infos['error_count']} error(s) in this "
                            "configuration; see the fields below.")
        return render(request, "controlcenter/connector_new.html", context, status=400)
    name = config.pop("name", "")
    try:
        actions.create_connector(request, name, config)
    except actions.ActionError as exc:
        context["error"] = str(exc)
        return render(request, "controlcenter/connector_new.html", context, status=400)
    messages.info(request, f"Connector {name} created.")
    return redirect(reverse("connector", kwargs={"name": name}))
