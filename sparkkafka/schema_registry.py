"""A Confluent-compatible schema registry over HTTP, as the column helpers use it.

Django-free on purpose: Spark executors run this, so it speaks the registry's REST API with
httpx (``/schemas/ids/{id}``, ``/subjects/{subject}/versions/...``) and never imports the
platform's registry app. Schemas by id never change, so they are cached for the life of the
client; one client per Python worker means each id is fetched once per worker (Spark reuses
workers across tasks). ``latest`` is asked every time: it is read once on the driver, where
the column's Spark type is fixed.

A registry is named by its URL, or, when it asks for a login or has its own CA (the
platform's ``--secure``: HTTPS and HTTP Basic), by Confluent's client config, the keys
confluent-kafka's ``SchemaRegistryClient`` takes: ``url``, ``basic.auth.user.info``
(``user:password``; ``basic.auth.credentials.source`` ``USER_INFO``, or ``URL`` for the
login in the URL) and ``ssl.ca.location`` (a PEM file of the CAs to trust). ``Registry``
holds it, picklable, to ship to executors; every helper taking ``registry_url`` takes any
of the three (``as_registry()``).
"""

from __future__ import annotations

import json
import ssl
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
MAGIC = 0


class SchemaError(ValueError):
    """A record or schema a helper cannot read or write; the message says which and why."""


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry serves it (``schemaType`` defaults to AVRO, as Confluent's)."""

    id: int
    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()
    subject: str | None = None
    version: int | None = None


# Confluent's client keys this module honours; any other is refused, as Confluent's client
# refuses unknown properties
CLIENT_KEYS = ("url", "basic.auth.user.info", "basic.auth.credentials.source",
               "ssl.ca.location")


@dataclass(frozen=True)
class Registry:
    """How to reach a registry: its URL, the Basic login (``user:password``, as Confluent's
    ``basic.auth.user.info``; "" none) and the CA file its certificate is checked against
    ("": the system's)."""

    url: str
    basic_auth_user_info: str = field(default="", repr=False)
    ssl_ca_location: str = ""

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Registry:
        """From Confluent's client keys (``CLIENT_KEYS``)."""
        unknown = sorted(set(config) - set(CLIENT_KEYS))
        if unknown:
            raise SchemaError(f"unknown schema registry client setting {unknown[0]!r} "
                              f"(known: {', '.join(CLIENT_KEYS)})")
        url = str(config.get("url", "")).split(",")[0].strip()
        if not url:
            raise SchemaError("the schema registry client config needs url")
        source = str(config.get("basic.auth.credentials.source", "USER_INFO")).upper()
        if source not in ("USER_INFO", "URL"):
            raise SchemaError(f"basic.auth.credentials.source {source}: USER_INFO or URL")
        info = str(config.get("basic.auth.user.info", "")) if source == "USER_INFO" else ""
        if info and ":" not in info:
            raise SchemaError("basic.auth.user.info must be user:password")
        return cls(url, info, str(config.get("ssl.ca.location", "")))

    def config(self) -> dict[str, str]:
        """Confluent's client keys of this registry (what ``from_config`` reads)."""
        return {"url": self.url,
                **({"basic.auth.user.info": self.basic_auth_user_info}
                   if self.basic_auth_user_info else {}),
                **({"ssl.ca.location": self.ssl_ca_location} if self.ssl_ca_location else {})}

    def auth(self) -> tuple[str, str] | None:
        """httpx's Basic ``auth``; None leaves a login in the URL (httpx sends it)."""
        if not self.basic_auth_user_info:
            return None
        user, _, password = self.basic_auth_user_info.partition(":")
        return user, password

    def verify(self) -> ssl.SSLContext | bool:
        """httpx's ``verify``: a context trusting ``ssl_ca_location``, else the system's."""
        if not self.ssl_ca_location:
            return True
        try:
            return ssl.create_default_context(cafile=self.ssl_ca_location)
        except (OSError, ssl.SSLError) as exc:
            raise SchemaError(f"ssl.ca.location {self.ssl_ca_location}: {exc}") from exc


# What names a registry: its URL, Confluent's client config, or a Registry
RegistryLike = str | Mapping[str, str] | Registry


def as_registry(given: RegistryLike) -> Registry:
    """``given`` as a Registry (a URL, Confluent's client config, or one already)."""
    if isinstance(given, Registry):
        return given
    if isinstance(given, str):
        return Registry(given)
    return Registry.from_config(given)


@dataclass
class RegistryClient:
    url: str
    auth: tuple[str, str] | None = field(default=None, repr=False)
    verify: ssl.SSLContext | bool = field(default=True, repr=False)
    _by_id: dict[int, RegisteredSchema] = field(default_factory=dict, repr=False)
    _serialized: dict[tuple[str, int], str] = field(default_factory=dict, repr=False)
    _subject_ids: dict[str, set[int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")

    @classmethod
    def of(cls, given: RegistryLike) -> RegistryClient:
        """A client of ``given`` (``as_registry()``), with its login and CA."""
        found = as_registry(given)
        return cls(found.url, found.auth(), found.verify())

    def by_id(self, schema_id: int) -> RegisteredSchema:
        found = self._by_id.get(schema_id)
        if found is None:
            body = self._get(f"/schemas/ids/{schema_id}")
            found = self._by_id[schema_id] = _schema(schema_id, body)
        return found

    def latest(self, subject: str) -> RegisteredSchema:
        return self.version(subject, "latest")

    def version(self, subject: str, version: int | str) -> RegisteredSchema:
        body = self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}")
        found = _schema(int(body["id"]), body)
        self._by_id.setdefault(found.id, found)
        return found

    def serialized(self, subject: str | None, version: int | None, schema_id: int) -> str:
        """A Protobuf schema as a base64 ``FileDescriptorProto`` (``?format=serialized``)."""
        key = (subject or "", version or schema_id)
        if key not in self._serialized:
            path = (
                f"/subjects/{quote(subject, safe='')}/versions/{version}"
                if subject is not None
                else f"/schemas/ids/{schema_id}"
            )
            self._serialized[key] = str(self._get(path, {"format": "serialized"})["schema"])
        return self._serialized[key]

    def in_subject(self, schema_id: int, subject: str) -> bool:
        """Whether ``schema_id`` is one of ``subject``'s versions (asked once per id)."""
        known = self._subject_ids.setdefault(subject, set())
        if schema_id not in known:
            body: Any = self._get(f"/schemas/ids/{schema_id}/versions")
            if any(v.get("subject") == subject for v in body):
                known.add(schema_id)
            else:
                return False
        return True

    def register(
        self, subject: str, schema_type: str, text: str, references: tuple[Reference, ...] = ()
    ) -> int:
        """The id of ``text`` under ``subject``, registering it if it is new there."""
        body: dict[str, Any] = {"schema": text}
        if schema_type != AVRO:
            body["schemaType"] = schema_type
        if references:
            body["references"] = [
                {"name": r.name, "subject": r.subject, "version": r.version} for r in references
            ]
        answer = self._send("POST", f"/subjects/{quote(subject, safe='')}/versions", body)
        return int(answer["id"])

    def lookup(self, subject: str, schema_type: str, text: str) -> int:
        """The id of ``text`` as one of ``subject``'s versions (40403 if it is not)."""
        body: dict[str, Any] = {"schema": text}
        if schema_type != AVRO:
            body["schemaType"] = schema_type
        return int(self._send("POST", f"/subjects/{quote(subject, safe='')}", body)["id"])

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        return self._send("GET", path, None, params)

    def _send(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        try:
            response = httpx.request(
                method, self.url + path, json=body, params=params, headers=headers,
                timeout=30, auth=self.auth, verify=self.verify,
            )
        except httpx.HTTPError as exc:
            raise SchemaError(f"schema registry {self.url} unreachable: {exc}") from exc
        if response.status_code != 200:
            raise SchemaError(
                f"schema registry {method} {path}: HTTP {response.status_code} {response.text}"
            )
        return response.json()


def _schema(schema_id: int, body: dict[str, Any]) -> RegisteredSchema:
    references = tuple(
        Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references", [])
    )
    version = body.get("version")
    return RegisteredSchema(
        id=schema_id,
        schema_type=body.get("schemaType", AVRO),
        text=body["schema"],
        references=references,
        subject=body.get("subject"),
        version=int(version) if version is not None else None,
    )


def split_wire(raw: bytes) -> tuple[int, bytes]:
    """The schema id and the rest of a Confluent wire-format value (magic byte 0, id)."""
    if len(raw) < 5 or raw[0] != MAGIC:
        raise SchemaError("not the Confluent wire format (no magic byte 0 and schema id)")
    (schema_id,) = struct.unpack(">I", raw[1:5])
    return schema_id, raw[5:]


def wire_prefix(schema_id: int) -> bytes:
    return struct.pack(">bI", MAGIC, schema_id)


def json_text(schema: RegisteredSchema) -> Any:
    try:
        return json.loads(schema.text)
    except ValueError as exc:
        raise SchemaError(f"schema id {schema.id} is not JSON: {exc}") from exc
