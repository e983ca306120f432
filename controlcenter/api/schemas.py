"""/api/v1/schemas/...: subjects, versions, the diff of two versions, compatibility levels,
the compatibility test and registering a version, through the registry app in-process (its
own Confluent API stays at /schema-registry/; this one carries the control center's audit
and permissions)."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from controlcenter import actions, schemadiff
from controlcenter.access import Capability
from controlcenter.api.base import ControlCenterError, ControlCenterView, refusal
from controlcenter.pages import schemas as pages
from registry import formats, lookups
from registry.compatibility import Level
from registry.models import Config


class SubjectSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    schemaType = serializers.CharField(source="schema_type",  # Confluent's key
                                       help_text="its latest version's: AVRO, JSON, PROTOBUF")
    versions = serializers.IntegerField()
    latest = serializers.IntegerField()
    compatibility = serializers.CharField(help_text="the subject's own level; '' = global")


class VersionSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    id = serializers.IntegerField(source="schema_id")
    schema = serializers.CharField(source="schema.text")
    schemaType = serializers.CharField(source="schema.schema_type")
    references = serializers.ListField(source="schema.references",
                                       child=serializers.DictField())


SCHEMA_BODY = inline_serializer("SchemaBody", {
    "schema": serializers.CharField(),
    "schemaType": serializers.ChoiceField(choices=list(formats.TYPES), required=False,
                                          help_text="AVRO when absent, as Confluent's"),
    "references": serializers.ListField(child=serializers.DictField(), required=False)})
LEVEL_BODY = inline_serializer("CompatibilityBody", {
    "compatibility": serializers.ChoiceField(choices=[level.value for level in Level])})


def schema_text(body: Any) -> actions.SchemaText:
    """A register or test body, in Confluent's keys; 42201 when it holds no schema."""
    schema = body.get("schema") if isinstance(body, dict) else None
    if not isinstance(schema, str):
        raise ControlCenterError(422, "42201", "The body has no schema string.")
    schema_type = body.get("schemaType") or formats.AVRO
    references = body.get("references") or []
    if not isinstance(schema_type, str) or not isinstance(references, list):
        raise ControlCenterError(422, "42201", "schemaType is a string, references a list.")
    return actions.SchemaText(schema, schema_type, references)


def _versions(subject: str) -> list[Any]:
    versions = lookups.subject_versions(subject)
    if not versions:
        raise Http404(f"Subject {subject} has no versions.")
    return versions


class SubjectListView(ControlCenterView):
    @extend_schema(summary="Subjects with live versions", operation_id="subjects_list", parameters=[
        OpenApiParameter("q", str), OpenApiParameter("page", int)],
        responses=inline_serializer("SubjectPage", {
            "count": serializers.IntegerField(), "page": serializers.IntegerField(),
            "global_compatibility": serializers.CharField(),
            "results": SubjectSerializer(many=True)}))
    def get(self, request: Request) -> Response:
        rows = pages.subject_rows(request.query_params.get("q", "").strip())
        page = Paginator(rows, pages.PER_PAGE).get_page(request.query_params.get("page"))
        return Response({"count": page.paginator.count, "page": page.number,
                         "global_compatibility": lookups.compatibility_level(None).value,
                         "results": SubjectSerializer(pages.with_types(list(page.object_list)),
                                                      many=True).data})


class SubjectView(ControlCenterView):
    capability = Capability.CHANGE_SCHEMAS

    @extend_schema(summary="A subject's versions and compatibility level",
                   operation_id="subject_retrieve",
                   responses=inline_serializer("SubjectDetail", {
                       "subject": serializers.CharField(),
                       "compatibility": serializers.CharField(),
                       "own_compatibility": serializers.BooleanField(),
                       "versions": VersionSerializer(many=True)}))
    def get(self, request: Request, subject: str) -> Response:
        versions = _versions(subject)
        own = Config.objects.filter(subject=subject, compatibility__isnull=False).exists()
        return Response({"subject": subject,
                         "compatibility": lookups.compatibility_level(subject).value,
                         "own_compatibility": own,
                         "versions": VersionSerializer(versions, many=True).data})

    @extend_schema(summary="Test the schema, then register it as the next version",
                   request=SCHEMA_BODY, responses=inline_serializer("Registered", {
                       "id": serializers.IntegerField(), "version": serializers.IntegerField()}))
    def post(self, request: Request, subject: str) -> Response:
        try:
            registered = actions.register_schema_version(request._request, subject,
                                                         schema_text(request.data))
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response({"id": registered.schema_id, "version": registered.version})


class CompatibilityCheckView(ControlCenterView):
    @extend_schema(summary="Test a schema against the subject's level (changes nothing)",
                   request=SCHEMA_BODY, responses=inline_serializer("CompatibilityResult", {
                       "is_compatible": serializers.BooleanField(),
                       "messages": serializers.ListField(child=serializers.CharField())}))
    def post(self, request: Request, subject: str) -> Response:
        try:
            problems = actions.check_schema_compatibility(subject, schema_text(request.data))
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response({"is_compatible": not problems, "messages": problems})

    def get_permissions(self) -> list[Any]:
        return []  # a test is a read, whatever its method: anyone who may view


class DiffView(ControlCenterView):
    @extend_schema(summary="Side-by-side diff of two versions' pretty-printed schemas",
                   parameters=[OpenApiParameter("from", int), OpenApiParameter("to", int)],
                   responses=inline_serializer("Diff", {
                       "from": serializers.IntegerField(), "to": serializers.IntegerField(),
                       "changed": serializers.IntegerField(),
                       "rows": serializers.ListField(child=serializers.DictField())}))
    def get(self, request: Request, subject: str) -> Response:
        by_number = {v.version: v for v in _versions(subject)}
        try:
            old = by_number[int(request.query_params["from"])]
            new = by_number[int(request.query_params["to"])]
        except (KeyError, ValueError):
            raise ControlCenterError(404, "40402", "from and to must name "
                                     f"versions of {subject}: {sorted(by_number)}") from None
        rows = schemadiff.side_by_side(old.schema.text, new.schema.text,
                                       old.schema.schema_type, new.schema.schema_type)
        return Response({"from": old.version, "to": new.version,
                         "changed": schemadiff.changed_lines(rows),
                         "rows": [{"left": r.left.as_json(), "right": r.right.as_json()}
                                  for r in rows]})


class CompatibilityView(ControlCenterView):
    """The global level (no subject) or a subject's own level."""

    capability = Capability.CHANGE_SCHEMAS

    @extend_schema(summary="The compatibility level in force", responses=LEVEL_BODY)
    def get(self, request: Request, subject: str | None = None) -> Response:
        return Response({"compatibility": lookups.compatibility_level(subject).value})

    @extend_schema(summary="Set the compatibility level", request=LEVEL_BODY,
                   responses=LEVEL_BODY)
    def put(self, request: Request, subject: str | None = None) -> Response:
        level = request.data.get("compatibility") if isinstance(request.data, dict) else None
        try:
            actions.set_schema_compatibility(request._request, subject, str(level).upper())
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response({"compatibility": str(level).upper()})

    @extend_schema(summary="Remove a subject's own level: the global one applies",
                   responses=LEVEL_BODY)
    def delete(self, request: Request, subject: str | None = None) -> Response:
        if subject is None:
            raise ControlCenterError(405, "40401", "Name a subject: the global "
                                     "level can be set, not removed.")
        try:
            actions.clear_schema_compatibility(request._request, subject)
        except actions.ActionError as exc:
            raise refusal(exc) from exc
        return Response({"compatibility": lookups.compatibility_level(subject).value})
