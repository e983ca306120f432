"""The Confluent Schema Registry REST API over DRF views.

Views parse the request, call a lookup or an action and shape Confluent's JSON; every
error is a `RegistryError` (or a DRF error) rendered by `apierrors.exception_handler`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.db import connection, connections
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.template.response import SimpleTemplateResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

import httpauth

from . import actions, errors, formats, lookups, params
from .cache import NotInMemory, memory_only, need_database, trying_memory
from .compatibility import Level
from .models import Config, Mode, Subject, SubjectVersion
from .negotiation import PARSERS, RENDERERS, RegistryNegotiation


class RegistryView(APIView):
    # Methods that may be answered on the event loop from memory alone (see `served`).
    memory_methods: frozenset[str] = frozenset()
    renderer_classes = RENDERERS
    parser_classes = PARSERS
    content_negotiation_class = RegistryNegotiation
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    api_error = staticmethod(errors.api_error)  # for apierrors.exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if "subject" in self.kwargs:
            subject = params.path_value(self.kwargs["subject"])
            self.kwargs["subject"] = params.qualified_subject(subject)
        self.authorize(request)

    # POSTs that only read: a lookup in a subject and a compatibility test.
    reading_posts = False

    def authorize(self, request: Request) -> None:
        """With a Karapace authfile (httpauth/authfile.py): Read or Write on
        `Subject:<subject>`, on `Config:` for the global config and mode, and Read on any
        subject using a schema id; 403 (40301) otherwise. List views filter instead."""
        allowed = _allowed(request)
        if allowed is None:
            return
        write = request.method not in ("GET", "HEAD", "OPTIONS") and not self.reading_posts
        if "subject" in self.kwargs:
            resources = [f"Subject:{self.kwargs['subject']}"]
        elif isinstance(self, (ConfigView, ModeView)):
            resources = ["Config:"]
        elif "schema_id" in self.kwargs:
            need_database()
            resources = [f"Subject:{name}" for name in SubjectVersion.objects.filter(
                schema_id=self.kwargs["schema_id"]).values_list("subject__name", flat=True)]
        else:
            return  # the root, the types, the contexts and the lists (filtered)
        if not allowed(write, resources):
            raise errors.RegistryError(403, httpauth.FORBIDDEN, "Forbidden")

    @staticmethod
    def flag(request: Request, name: str) -> bool:
        return params.flag(request.query_params, name)


def _allowed(request: Request) -> Callable[[bool, list[str]], bool] | None:
    """Whether the caller may read (False) or write (True) one of the resources, when a
    Karapace authfile decides (httpauth/README.md); None: everything is allowed."""
    authfile = httpauth.registry_authfile() if httpauth.enabled() else None
    principal = getattr(getattr(request, "_request", request), "millrace_principal", None)
    if authfile is None or principal is None:
        return None
    rules = authfile.current()
    return lambda write, resources: rules.allows(principal.username, write, resources)


def _schema_request(request: Request) -> actions.SchemaRequest:
    return actions.SchemaRequest.from_body(request.data)


def _registered_id(subject: str, request: actions.SchemaRequest, normalize: bool) -> int | None:
    """The id of a live version of `subject` with this schema: a registration that changes
    nothing (left to `actions.register_schema` outside READWRITE and for imports)."""
    if request.id is not None or lookups.mode(subject) not in (lookups.READWRITE, "FORWARD"):
        return None
    _, fingerprint = request.parse(normalize or lookups.normalize_configured(subject))
    for row in lookups.subject_versions(subject):
        if row.schema.fingerprint == fingerprint:
            return row.schema_id
    return None


class RootView(RegistryView):
    memory_methods = frozenset({"GET", "POST"})

    def get(self, request: Request) -> HttpResponseBase:
        return Response({})  # a browser gets the project's index page instead

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
        allowed = _allowed(request)
        if allowed is not None:
            names = {n for n in names if allowed(False, [f"Subject:{n}"])}
        return Response(params.page(request.query_params, sorted(names)))


class SubjectView(RegistryView):
    reading_posts = True
    memory_methods = frozenset({"POST"})

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
    memory_methods = frozenset({"GET", "POST"})

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
        """Register a schema (already registered: its id, from memory when it can)."""
        schema_request = _schema_request(request)
        normalize = self.flag(request, "normalize")
        if trying_memory():  # the thread's attempt goes straight to the locked check
            schema_id = _registered_id(subject, schema_request, normalize)
            if schema_id is not None:
                return Response({"id": schema_id})
            need_database()
        schema_id = actions.register_schema(subject, schema_request, normalize)
        return Response({"id": schema_id})


class VersionView(RegistryView):
    memory_methods = frozenset({"GET"})

    def get(self, request: Request, subject: str, version: str) -> Response:
        number = params.version(version)
        row = lookups.subject_version(subject, number, self.flag(request, "deleted"))
        body = lookups.version_body(row)
        fmt = request.query_params.get("format")
        if fmt:
            body["schema"] = lookups.formatted_text(row.schema, fmt)
        return Response(body)

    def delete(self, request: Request, subject: str, version: str) -> Response:
        number = params.version(version)
        return Response(actions.delete_version(subject, number, self.flag(request, "permanent")))


class VersionSchemaView(RegistryView):
    memory_methods = frozenset({"GET"})

    def get(self, request: Request, subject: str, version: str) -> HttpResponseBase:
        number = params.version(version)
        row = lookups.subject_version(subject, number, self.flag(request, "deleted"))
        fmt = request.query_params.get("format")
        text = lookups.formatted_text(row.schema, fmt) if fmt else row.schema.text
        return _raw_schema(request, row.schema.schema_type, text)


class ReferencedByView(RegistryView):
    def get(self, request: Request, subject: str, version: str) -> Response:
        row = lookups.subject_version(subject, params.version(version), deleted=True)
        ids = lookups.referenced_by(subject, row.version)
        return Response(params.page(request.query_params, ids))


def _raw_schema(request: Request, schema_type: str, text: str) -> HttpResponseBase:
    """The schema itself as the body: JSON for Avro and JSON Schema, the text as it is
    for Protobuf (as Confluent answers, under the negotiated JSON media type)."""
    if schema_type != formats.PROTOBUF:
        return Response(json.loads(text))
    media_type = getattr(request, "accepted_media_type", None) or "application/json"
    return HttpResponse(text.encode(), content_type=media_type)


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
        allowed = _allowed(request)
        bodies = [lookups.version_body(r) for r in rows
                  if allowed is None or allowed(False, [f"Subject:{r.subject.name}"])]
        if self.flag(request, "latestOnly"):
            latest = {body["subject"]: body for body in bodies}
            bodies = list(latest.values())
        return Response(params.page(request.query_params, bodies))


class SchemaByIdView(RegistryView):
    memory_methods = frozenset({"GET"})

    def get(self, request: Request, schema_id: int) -> Response:
        return Response(lookups.schema_body(schema_id, request.query_params.get("format")))


class SchemaTextByIdView(RegistryView):
    memory_methods = frozenset({"GET"})

    def get(self, request: Request, schema_id: int) -> HttpResponseBase:
        body = lookups.schema_body(schema_id, request.query_params.get("format"))
        return _raw_schema(request, body.get("schemaType", formats.AVRO), body["schema"])


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
    memory_methods = frozenset({"GET"})

    def get(self, request: Request) -> Response:
        return Response(list(formats.TYPES))


class CompatibilityView(RegistryView):
    """Test a schema against one version (`version` given) or all versions of a subject."""

    reading_posts = True

    def post(self, request: Request, subject: str, version: str | None = None) -> Response:
        schema_request = _schema_request(request)
        normalize = self.flag(request, "normalize") or lookups.normalize_configured(subject)
        parsed, _ = schema_request.parse(normalize)
        number = None if version is None else params.version(version)
        messages = lookups.compatibility_messages(
            subject, parsed, number, schema_request.schema_type)
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


def served(view_class: type[RegistryView]) -> Callable[..., Any]:
    """The view as an async Django view: from memory on the event loop when it can.

    A method in `memory_methods` first runs on the event loop inside
    `cache.memory_only()`: reads come from the reader caches, nothing waits on a thread.
    If it needs the database (`NotInMemory`), and for every other method, the view runs on
    Django's sync thread, as Django runs any sync view.
    """
    sync_view = view_class.as_view()
    on_thread = sync_to_async(_closing(_rendered(sync_view)), thread_sensitive=True)

    async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method in view_class.memory_methods and _body_kept(request):
            try:
                with memory_only():
                    return _rendered(sync_view)(request, *args, **kwargs)
            except NotInMemory:
                pass
        # A thread of its own, as Django gives each request (the API handler does not:
        # millrace/asgi.py), so that a slow write never holds up other requests.
        async with ThreadSensitiveContext():
            response: HttpResponseBase = await on_thread(request, *args, **kwargs)
        return response

    view.cls = view_class  # type: ignore[attr-defined]  # drf-spectacular finds the view
    view.initkwargs = {}  # type: ignore[attr-defined]
    return csrf_exempt(view)


def _body_kept(request: HttpRequest) -> bool:
    """Read the body into memory, so that a second attempt can parse it again, if Django
    allows that (DATA_UPLOAD_MAX_MEMORY_SIZE); a larger one goes straight to the thread."""
    declared = str(request.META.get("CONTENT_LENGTH") or "0")
    if not declared.isdigit() or int(declared) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return False
    request.body  # noqa: B018
    return True


def _closing(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """The view, then its thread's database connections closed, since the thread ends with
    the request; unless it runs inside a transaction of its caller's (a test's)."""

    def run(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        finally:
            if not connection.in_atomic_block:
                connections.close_all()

    return run


def _rendered(sync_view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """The view, its response rendered into a plain HttpResponse: Django's async handler
    hops to its sync thread to render anything with a `render` method, rendered or not."""

    def render(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = sync_view(request, *args, **kwargs)
        if not isinstance(response, SimpleTemplateResponse):
            return response
        response.render()
        return HttpResponse(response.content, status=response.status_code,
                            headers=dict(response.headers))

    return render


class NotFoundView(RegistryView):
    """Any other path: Confluent's JSON 404, whatever the method."""

    memory_methods = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"})

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.http_method_names = ["get", "post", "put", "delete", "patch", "head", "options"]
        return super().dispatch(request, *args, **kwargs)

    def handle_404(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise errors.http_error(404, "Not Found")

    get = post = put = delete = patch = handle_404
