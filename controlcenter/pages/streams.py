"""The Streams pages: persistent queries (list, create, stop, restart, delete, a query's
status, failure and live progress charts) and ad-hoc queries over the same topic views.

Pages read `StreamQuery` rows; validation and ad-hoc queries run in the process's Spark
session (`controlcenter.streams.sql`); every change goes through `streams.actions` and needs
the `run_analyses` permission (Spark work, like the lag analyses).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

from controlcenter.access import Capability, requires
from controlcenter.actions import ActionError
from controlcenter.streams import actions
from controlcenter.streams.models import OutputMode, StreamQuery, ValueFormat

ADHOC_DEFAULT_LIMIT, ADHOC_MAX_LIMIT = 100, 10_000
ADHOC_DEFAULT_TIMEOUT_S, ADHOC_MAX_TIMEOUT_S = 30, 300

EXAMPLE_SQL = """SELECT window.start AS window_start, window.end AS window_end,
       CAST(key AS STRING) AS k, count(*) AS n
FROM orders
WATERMARK timestamp DELAY OF INTERVAL 10 SECONDS
GROUP BY window(timestamp, '1 minute'), CAST(key AS STRING)"""


class QueryForm(forms.Form):
    name = forms.SlugField(max_length=100)
    sql = forms.CharField(label="SQL", widget=forms.Textarea(attrs={
        "rows": 8, "spellcheck": "false", "class": "code", "placeholder": EXAMPLE_SQL}),
        help_text="Spark SQL. Each topic is a streaming view named after it (characters SQL "
                  "cannot spell become _) with key, value, topic, partition, offset, "
                  "timestamp, timestampType, and the value's fields when its subject has a "
                  "schema. Watermark: WATERMARK col DELAY OF INTERVAL ... after FROM.")
    output_topic = forms.CharField(max_length=249)
    key_column = forms.CharField(max_length=200, required=False,
                                 help_text="A column of the query, written as the record key.")
    value_format = forms.ChoiceField(choices=ValueFormat.choices, initial=ValueFormat.JSON)
    output_mode = forms.ChoiceField(choices=OutputMode.choices, initial=OutputMode.APPEND)

    def spec(self) -> actions.QuerySpec:
        data = self.cleaned_data
        return actions.QuerySpec(data["name"], data["sql"], data["output_topic"].strip(),
                                 data["key_column"].strip(), data["value_format"],
                                 data["output_mode"])


class LagAnomalyForm(forms.Form):
    """The built-in lag-anomaly query's settings (laganalysis/lagbaseline.py's Rule)."""

    name = forms.SlugField(max_length=100, initial="lag-anomalies")
    k = forms.FloatField(label="k (deviations above the mean)", initial=3.0, min_value=0.1)
    window = forms.IntegerField(label="Window (collector cycles)", initial=60, min_value=2,
                                max_value=10_000)
    min_history = forms.IntegerField(label="Cycles before judging", initial=10, min_value=1)

    def spec(self) -> actions.QuerySpec:
        data = self.cleaned_data
        return actions.lag_anomaly_spec(data["name"], {
            "k": data["k"], "window": data["window"], "min_history": data["min_history"]})


class AdhocForm(forms.Form):
    adhoc_sql = forms.CharField(label="SQL", widget=forms.Textarea(attrs={
        "rows": 4, "spellcheck": "false", "class": "code",
        "placeholder": "SELECT CAST(value AS STRING) FROM orders ORDER BY offset DESC"}))
    limit = forms.IntegerField(min_value=1, max_value=ADHOC_MAX_LIMIT,
                               initial=ADHOC_DEFAULT_LIMIT)
    timeout_s = forms.IntegerField(label="Timeout (s)", min_value=1,
                                   max_value=ADHOC_MAX_TIMEOUT_S, initial=ADHOC_DEFAULT_TIMEOUT_S)


def streams(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _create(request)
    return _list_page(request, QueryForm(), AdhocForm())


def _list_page(request: HttpRequest, form: QueryForm, adhoc: AdhocForm, status: int = 200,
               **extra: Any) -> HttpResponse:  # fmt: skip
    extra.setdefault("anomaly", LagAnomalyForm())
    return render(request, "controlcenter/streams.html", {
        "queries": list(StreamQuery.objects.all()), "form": form, "adhoc": adhoc, **extra},
        status=status)


@requires(Capability.RUN_ANALYSES)
def _create(request: HttpRequest) -> HttpResponse:
    form = QueryForm(request.POST)
    if form.is_valid():
        try:
            query = actions.create_stream_query(request, form.spec())
        except ActionError as exc:
            form.add_error("name" if exc.code_name == "QUERY_EXISTS" else
                           "output_topic" if exc.code_name == "INVALID_TOPIC" else "sql",
                           exc.message)
        else:
            messages.success(request, f"Stream query {query.name} queued.")
            return redirect("stream", name=query.name)
    return _list_page(request, form, AdhocForm(), status=400, create_open=True)


@requires(Capability.RUN_ANALYSES)
def stream_lag_anomaly(request: HttpRequest) -> HttpResponse:
    """Start the built-in lag-anomaly query: from the Streams page's form, or from a group
    page's button (defaults; back to that page, `next`)."""
    if request.method != "POST":
        return redirect("streams")
    back = request.POST.get("next", "")
    form = LagAnomalyForm(request.POST if "k" in request.POST else
                          {k: f.initial for k, f in LagAnomalyForm.base_fields.items()})
    if form.is_valid():
        try:
            query = actions.create_stream_query(request, form.spec())
        except ActionError as exc:
            if back and url_has_allowed_host_and_scheme(back, None):
                messages.error(request, f"Could not start the lag-anomaly query. {exc.message}")
                return redirect(back)
            form.add_error("name" if exc.code_name == "QUERY_EXISTS" else None, exc.message)
        else:
            messages.success(request, f"Lag-anomaly query {query.name} queued: alerts show on "
                                      "the consumer groups' pages.")
            if back and url_has_allowed_host_and_scheme(back, None):
                return redirect(back)
            return redirect("stream", name=query.name)
    return _list_page(request, QueryForm(), AdhocForm(), status=400, anomaly=form)


@requires(Capability.RUN_ANALYSES)
def stream_adhoc(request: HttpRequest) -> HttpResponse:
    adhoc = AdhocForm(request.POST)
    if not adhoc.is_valid():
        return _list_page(request, QueryForm(), adhoc, status=400)
    data = adhoc.cleaned_data
    try:
        rows = actions.run_adhoc_query(request, data["adhoc_sql"], data["limit"],
                                       float(data["timeout_s"]))
    except ActionError as exc:
        adhoc.add_error("adhoc_sql", exc.message)
        return _list_page(request, QueryForm(), adhoc, status=400)
    return _list_page(request, QueryForm(), adhoc, rows=rows)


def stream(request: HttpRequest, name: str) -> HttpResponse:
    query = get_object_or_404(StreamQuery, name=name)
    return render(request, "controlcenter/stream.html", {
        "query": query, "progress": query.progress})


@requires(Capability.RUN_ANALYSES)
def stream_command(request: HttpRequest, name: str, command: str) -> HttpResponse:
    query = get_object_or_404(StreamQuery, name=name)
    verbs = {"stop": actions.stop_stream_query, "restart": actions.restart_stream_query,
             "delete": actions.delete_stream_query}
    if command not in verbs:
        raise Http404(f"No command {command}.")
    try:
        verbs[command](request, query)
    except ActionError as exc:
        messages.error(request, exc.message)
        return redirect("stream", name=name)
    if command == "delete":
        messages.info(request, f"Stream query {name} deleted with its checkpoint.")
        return redirect("streams")
    messages.info(request, f"Stream query {name}: {command} requested.")
    return redirect("stream", name=name)
