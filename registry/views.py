"""The Confluent Schema Registry REST API over DRF views.

Views parse the request, call a lookup or an action and shape Confluent's JSON; every
error is a `RegistryError` (or a DRF error) rendered by `errors.exception_handler`.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import Resolver404
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import actions, errors, lookups, params
from .compatibility import Level
from .models import Config, Mode, Subject, SubjectVersion
from .negotiation import PARSERS, RENDERERS, RegistryNegotiation


class RegistryView(APIView):
    renderer_classes = RENDERERS
    parser_classes = PARSERS
    content_negotiation_class = RegistryNegotiation
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def get_exception_handler(self) -> Any:
        return errors.exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if "subject" in self.kwargs:
            subject = params.path_value(self.kwargs["subject"])
            self.kwargs["subject"] = params.qualified_subject(subject)

    @staticmethod
    def flag(request: Request, name: str) -> bool:
        return params.flag(request.query_params, name)


def _schema_request(request: Request) -> actions.SchemaRequest:
    return actions.SchemaRequest.from_body(request.data)


class RootView(RegistryView):
    def get(self, request: Request) -> Response:
        return Response({})

    def post(self, request: Request) -> Response:
        return Response({})


class SubjectListView(RegistryView):
    def get(self, request: Request) -> Response:
        deleted_only = self.flag(request, "deletedOnly")
        rows = SubjectVersion.objects.values_list("subject__name", "deleted")
        live = {name for name, deleted in rows if not deleted}
        every = {name for name, _ in rows}
        names = every - live if deleted_only else every if self.flag(request, "deleted") else live
        prefix = request.query_params.get("subjectPrefix", "")
        names = {n for n in names if n.startswith(prefix)}
        return Response(params.page(request.query_params, sorted(names)))


class SubjectView(RegistryView):
    def post(self, request: Request, subject: str) -> Response:
        """Look a schema up in a subject."""
        deleted = self.flag(request, "deleted")
        schema_request = _schema_request(request)
        rows = lookups.subject_versions(subject, deleted=deleted)
        if not rows:
            raise errors.subject_not_found(subject)
        normalize = self.flag(request, "normalize") or lookups.normalize_configured(subject)
        _, fingerprint = schema_request.parse(normalize)
        for row in rows:
            if row.schema.fingerprint == fingerprint:
                return Response(lookups.version_body(row))
        raise errors.schema_not_found()

    def delete(self, request: Request, subject: str) -> Response:
        return Response(actions.delete_subject(subject, self.flag(request, "permanent")))


class VersionListView(RegistryView):
    def get(self, request: Request, subject: str) -> Response:
        rows = lookups.subject_versions(subject, deleted=True)
        if self.flag(request, "deletedOnly"):
            rows = [r for r in rows if r.deleted]
        elif not self.flag(request, "deleted"):
            rows = [r for r in rows if not r.deleted]
        if not rows:
            raise errors.subject_not_found(subject)
        return Response(params.page(request.query_params, [r.version for r in rows]))

    def post(self, request: Request, subject: str) -> Response:
        """Register a schema."""
        schema_id = actions.register_schema(
            subject, _schema_request(request), self.flag(request, "normalize")
        )
        return Response({"id": schema_id})


class VersionView(RegistryView):
    def get(self, request: Request, subject: str, version: str) -> Response:
        number = params.version(version)
        row = lookups.subject_version(subject, number, self.flag(request, "deleted"))
        return Response(lookups.version_body(row))

    def delete(self, request: Request, subject: str, version: str) -> Response:
        number = params.version(version)
        return Response(actions.delete_version(subject, number, self.flag(request, "permanent")))


class VersionSchemaView(RegistryView):
    def get(self, request: Request, subject: str, version: str) -> Response:
        number = params.version(version)
        row = lookups.subject_version(subject, number, self.flag(request, "deleted"))
        return Response(_raw_schema(row.schema.text))


class ReferencedByView(RegistryView):
    def get(self, request: Request, subject: str, version: str) -> Response:
        row = lookups.subject_version(subject, params.version(version), deleted=True)
        ids = lookups.referenced_by(subject, row.version)
        return Response(params.page(request.query_params, ids))


def _raw_schema(text: str) -> Any:
    return json.loads(text)


class SchemaListView(RegistryView):
    def get(self, request: Request) -> Response:
        rows = SubjectVersion.objects.select_related("schema", "subject").order_by(
            "subject__name", "version"
        )
        if not self.flag(request, "deleted"):
            rows = rows.filter(deleted=False)
        prefix = request.query_params.get("subjectPrefix", "")
        if prefix:
            rows = rows.filter(subject__name__startswith=prefix)
        bodies = [lookups.version_body(r) for r in rows]
        if self.flag(request, "latestOnly"):
            latest = {body["subject"]: body for body in bodies}
            bodies = list(latest.values())
        return Response(params.page(request.query_params, bodies))


class SchemaByIdView(RegistryView):
    def get(self, request: Request, schema_id: int) -> Response:
        return Response(lookups.schema_body(schema_id))


class SchemaTextByIdView(RegistryView):
    def get(self, request: Request, schema_id: int) -> Response:
        return Response(_raw_schema(lookups.schema_body(schema_id)["schema"]))


def _id_usages(request: Request, schema_id: int) -> list[SubjectVersion]:
    lookups.schema_body(schema_id)
    rows = SubjectVersion.objects.filter(schema_id=schema_id).select_related("subject")
    if not params.flag(request.query_params, "deleted"):
        rows = rows.filter(deleted=False)
    return list(rows.order_by("subject__name", "version"))


class SchemaSubjectsView(RegistryView):
    def get(self, request: Request, schema_id: int) -> Response:
        names = sorted({row.subject.name for row in _id_usages(request, schema_id)})
        return Response(params.page(request.query_params, names))


class SchemaVersionsView(RegistryView):
    def get(self, request: Request, schema_id: int) -> Response:
        usages = [
            {"subject": row.subject.name, "version": row.version}
            for row in _id_usages(request, schema_id)
        ]
        return Response(params.page(request.query_params, usages))


class SchemaTypesView(RegistryView):
    def get(self, request: Request) -> Response:
        return Response(["AVRO"])


class CompatibilityView(RegistryView):
    """Test a schema against one version (`version` given) or all versions of a subject."""

    def post(self, request: Request, subject: str, version: str | None = None) -> Response:
        schema_request = _schema_request(request)
        normalize = self.flag(request, "normalize") or lookups.normalize_configured(subject)
        parsed, _ = schema_request.parse(normalize)
        number = None if version is None else params.version(version)
        messages = lookups.compatibility_messages(subject, parsed, number)
        body: dict[str, Any] = {"is_compatible": not messages}
        if self.flag(request, "verbose"):
            body["messages"] = messages
        return Response(body)


class CompatibilityVersionView(CompatibilityView):
    """Test a schema against one version of a subject."""


def _level_body(level: str, normalize: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"compatibilityLevel": level}
    if normalize:
        body["normalize"] = True
    return body


class ConfigView(RegistryView):
    def get(self, request: Request, subject: str | None = None) -> Response:
        if subject is not None and not self.flag(request, "defaultToGlobal"):
            config = Config.objects.filter(subject=subject, compatibility__isnull=False).first()
            if config is None:
                raise errors.subject_config_not_found(subject)
        level = lookups.compatibility_level(subject)
        return Response(_level_body(level.value, lookups.normalize_configured(subject)))

    def put(self, request: Request, subject: str | None = None) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        level = body.get("compatibility")
        if level is None:
            return self.get(request, subject)
        if str(level).upper() not in Level.__members__:
            raise errors.invalid_compatibility_level()
        normalize = body.get("normalize")
        normalize = normalize if isinstance(normalize, bool) else None
        actions.set_compatibility(subject, str(level).upper(), normalize)
        answer: dict[str, Any] = {"compatibility": str(level).upper()}
        if normalize is not None:
            answer["normalize"] = normalize
        return Response(answer)

    def delete(self, request: Request, subject: str | None = None) -> Response:
        return Response({"compatibilityLevel": actions.delete_compatibility(subject).value})


class ModeView(RegistryView):
    def get(self, request: Request, subject: str | None = None) -> Response:
        explicit = subject is not None and not self.flag(request, "defaultToGlobal")
        if explicit and not Mode.objects.filter(subject=subject).exists():
            assert subject is not None
            raise errors.subject_mode_not_found(subject)
        return Response({"mode": lookups.mode(subject)})

    def put(self, request: Request, subject: str | None = None) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        mode = str(body.get("mode", "")).upper()
        if mode not in lookups.MODES:
            raise errors.invalid_mode()
        actions.set_mode(subject, mode, self.flag(request, "force"))
        return Response({"mode": mode})

    def delete(self, request: Request, subject: str | None = None) -> Response:
        return Response({"mode": actions.delete_mode(subject)})


class ContextListView(RegistryView):
    def get(self, request: Request) -> Response:
        names = Subject.objects.filter(versions__isnull=False).values_list("name", flat=True)
        contexts = {params.context_of(name) for name in names} | {params.DEFAULT_CONTEXT}
        return Response(params.page(request.query_params, sorted(contexts)))


@csrf_exempt
def route_by_raw_path(request: HttpRequest, tail: str) -> HttpResponseBase:
    """Route paths that hold a subject on the raw path (see `params.raw_tail`)."""
    from .urls import subject_resolver

    try:
        match = subject_resolver.resolve(params.raw_tail(request, tail))
    except Resolver404:
        return NotFoundView.as_view()(request)
    return match.func(request, *match.args, **match.kwargs)  # type: ignore[no-any-return]


@extend_schema(exclude=True)
class NotFoundView(RegistryView):
    """Any other path: Confluent's JSON 404, whatever the method."""

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.http_method_names = ["get", "post", "put", "delete", "patch", "head", "options"]
        return super().dispatch(request, *args, **kwargs)

    def handle_404(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise errors.http_error(404, "Not Found")

    get = post = put = delete = patch = handle_404
