"""The Messages page of a topic: browse (partition, offset or time, newest first or from the
beginning), filter on key, header and value server-side, download what is shown as JSON or
CSV, follow new messages live (the tail, pushed over the page's websocket by livetail.py),
and produce one message (text, or JSON in Avro, JSON Schema or Protobuf with a subject or a
schema id: `messagecodec.encode`).

Unlike the other cluster pages this one reads Kafka while rendering: records are not in
the collector's tables. Every read is one bounded `RecordReader` call (record count, bytes,
a short deadline), and a dead cluster gives a note on the page, never a hang or a 500.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from clusterclient import ClusterRequestError, ClusterUnavailable
from controlcenter import actions, connection, messagebrowser
from controlcenter.access import Capability, requires
from controlcenter.messagebrowser import MessagePage, MessageQuery
from controlcenter.messagecodec import KINDS, LABELS, Encoded, EncodeError, encode
from controlcenter.models import ClusterState, TopicState
from controlcenter.pages.banners import cluster_banners
from registry.models import SubjectVersion


class BrowseForm(forms.Form):
    partition = forms.IntegerField(min_value=0, required=False)
    start = forms.ChoiceField(choices=[(messagebrowser.NEWEST, "newest first"),
                                       (messagebrowser.OLDEST, "from the beginning"),
                                       (messagebrowser.OFFSET, "from offset"),
                                       (messagebrowser.TIMESTAMP, "from time")],
                              required=False)
    offset = forms.IntegerField(min_value=0, required=False)
    timestamp = forms.DateTimeField(required=False, help_text="UTC, e.g. 2026-01-31 14:05")
    limit = forms.IntegerField(min_value=1, max_value=messagebrowser.MAX_LIMIT, required=False)
    key = forms.CharField(max_length=500, required=False)
    value = forms.CharField(max_length=500, required=False)
    header = forms.CharField(max_length=500, required=False, help_text="name or name=value")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start = data.get("start") or messagebrowser.NEWEST
        if start == messagebrowser.OFFSET and data.get("offset") is None:
            self.add_error("offset", "Give the offset to start from.")
        if start == messagebrowser.TIMESTAMP and data.get("timestamp") is None:
            self.add_error("timestamp", "Give the time to start from.")
        return data

    def query(self, topic: str) -> MessageQuery:
        data = self.cleaned_data
        stamp = data.get("timestamp")
        if stamp is not None and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.UTC)
        return MessageQuery(topic, partition=data.get("partition"),
                            start=data.get("start") or messagebrowser.NEWEST,
                            offset=data.get("offset"), timestamp=stamp,
                            limit=data.get("limit") or 50, key=data.get("key") or "",
                            value=data.get("value") or "", header=data.get("header") or "")


def read_page(query: MessageQuery) -> tuple[MessagePage | None, str]:
    """One bounded read; (None, what went wrong in the cluster's words) on failure."""
    try:
        with connection.record_reader() as reader:
            return messagebrowser.browse(reader, query), ""
    except ClusterRequestError as exc:
        return None, f"{exc.code_name}: {exc.message}"
    except ClusterUnavailable as exc:
        return None, f"The cluster did not answer: {exc.message}"
    except ValueError as exc:
        return None, str(exc)


@require_GET
def topic_messages(request: HttpRequest, name: str) -> HttpResponse:
    form = BrowseForm(request.GET or None)
    page, error = None, ""
    if form.is_bound and not form.is_valid():
        error = "Check the fields marked below."
    else:
        if not form.is_bound:
            form = BrowseForm({"start": messagebrowser.NEWEST, "limit": 50})
            form.is_valid()
        page, error = read_page(form.query(name))
        download = request.GET.get("download")
        if page is not None and download in ("json", "csv"):
            return _download(name, page, download)
    cluster = ClusterState.current()
    context = {"cluster": cluster, "banners": cluster_banners(cluster), "topic_name": name,
               "topic": TopicState.objects.filter(name=name).first(), "form": form,
               "page": page, "error": error, "produce_form": ProduceForm(),
               "query_string": request.GET.urlencode(), "schema_subjects": schema_subjects()}
    return render(request, "controlcenter/messages.html", context)


def _download(topic: str, page: MessagePage, kind: str) -> HttpResponse:
    if kind == "csv":
        body, content_type = messagebrowser.as_csv(page.messages), "text/csv; charset=utf-8"
    else:
        body, content_type = messagebrowser.as_json(page.messages), "application/json"
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{topic}-messages.{kind}"'
    return response


class ProduceForm(forms.Form):
    prefix = "produce"  # its fields share the page with the browse form's key and value
    key = forms.CharField(required=False, widget=forms.TextInput(attrs={"placeholder": "(none)"}))
    value = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}),
                            help_text="Text as UTF-8, or JSON with a schema.")
    headers = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                              help_text="One name=value per line.")
    partition = forms.IntegerField(min_value=0, required=False,
                                   help_text="Empty: the producer's partitioner chooses.")
    subject = forms.CharField(
        max_length=255, required=False, label="Schema subject",
        widget=forms.TextInput(attrs={"list": "produce-subjects", "autocomplete": "off"}),
        help_text="Encode the value with this subject's latest schema (Avro, JSON Schema or "
                  "Protobuf, Confluent wire format).")
    schema_id = forms.IntegerField(min_value=1, required=False, label="or schema id")
    message_type = forms.CharField(max_length=255, required=False, label="Protobuf message",
                                   help_text="Full name; empty: the schema's first message.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if (data.get("subject") or "").strip() and data.get("schema_id") is not None:
            self.add_error("schema_id", "Give either a subject or a schema id.")
        return data

    def clean_headers(self) -> list[tuple[str, bytes]]:
        headers = []
        for line in self.cleaned_data["headers"].splitlines():
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            if not sep or not name.strip():
                raise forms.ValidationError(f"Not name=value: {line.strip()!r}")
            headers.append((name.strip(), value.strip().encode()))
        return headers


@requires(Capability.PRODUCE_MESSAGES)
def produce(request: HttpRequest, name: str) -> HttpResponse:
    form = ProduceForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            encoded = _encoded(data)
            produced = actions.produce_message(
                request, name, encoded.value if encoded else _text(data["value"]),
                data["key"].encode() if data["key"] else None,
                data["headers"], data["partition"], encoded.schema_id if encoded else None)
        except EncodeError as exc:
            form.add_error("value", str(exc))
        except actions.ActionError as exc:
            form.add_error(None, str(exc))
        else:
            what = (f"{LABELS.get(encoded.kind, encoded.kind)} (schema id {encoded.schema_id}"
                    f"{', ' + encoded.message_type if encoded.message_type else ''}) "
                    if encoded else "")
            flash.success(request, f"Produced {what}to {name} partition {produced.partition} "
                                   f"at offset {produced.offset}.")
            return redirect("messages", name=name)
    cluster = ClusterState.current()
    context = {"cluster": cluster, "banners": cluster_banners(cluster), "topic_name": name,
               "topic": TopicState.objects.filter(name=name).first(),
               "form": BrowseForm(), "page": None, "error": "", "produce_form": form,
               "produce_open": True, "schema_subjects": schema_subjects()}
    return render(request, "controlcenter/messages.html", context, status=400)


def _encoded(data: dict[str, Any]) -> Encoded | None:
    subject, schema_id = (data.get("subject") or "").strip(), data.get("schema_id")
    message_type = (data.get("message_type") or "").strip()
    if not subject and schema_id is None:
        if message_type:
            raise EncodeError("A Protobuf message needs a subject or a schema id.")
        return None
    return encode(data["value"], subject, schema_id, message_type)


def _text(text: str) -> bytes | None:
    return text.encode() if text else None


def schema_subjects() -> list[tuple[str, str]]:
    """(subject, its latest version's format) for the produce form's suggestions."""
    latest: dict[str, str] = {}
    rows = (SubjectVersion.objects.filter(deleted=False).order_by("subject__name", "version")
            .values_list("subject__name", "schema__schema_type")[:5000])
    for subject, schema_type in rows:
        latest[subject] = LABELS.get(KINDS.get(schema_type, ""), KINDS.get(schema_type, ""))
    return sorted(latest.items())
