"""What Confluent's three registry-backed converters share: their settings, the schema
registry over HTTP (httpx; the registry is another process, and connect imports no web
app), the subject name strategies and the wire format (magic byte 0, the schema id as four
big-endian bytes, then the format's own bytes).

A format module subclasses `RegistryConverter` with how a Connect schema becomes the
format's schema text (`schema_for`), how a value is written with a registered schema
(`encode`) and how bytes are read back into a Connect schema and value (`decode`).
"""

from __future__ import annotations

import struct
import threading
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from connect.api import DataException, Schema
from connect.configdef import ConfigException

from . import Converter

MAGIC = 0
HEADER = struct.Struct(">bI")
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TOPIC_NAME = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
RECORD_NAME = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
TOPIC_RECORD_NAME = "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"
STRATEGIES = (TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME)


@dataclass(frozen=True)
class Registered:
    """A schema as the registry answers it: its id, type and text, with references."""
    id: int
    schema_type: str  # AVRO, JSON, PROTOBUF
    text: str
    references: tuple[Mapping[str, Any], ...] = ()


class RegistryClient:
    """The few Schema Registry calls a converter makes, with Confluent's client caches:
    a schema's id once registered or looked up, and every schema by id (ids never change)."""

    def __init__(self, url: str, auth: tuple[str, str] | None = None,
                 timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(auth=auth, timeout=timeout,
                                 headers={"Accept": CONTENT_TYPE})
        self.ids: dict[tuple[str, str, str], int] = {}
        self.by_id: dict[tuple[int, str], Registered] = {}
        self.lock = threading.Lock()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            answer = self.http.request(method, self.url + path, json=body,
                                       headers={"Content-Type": CONTENT_TYPE})
        except httpx.HTTPError as exc:
            raise DataException(f"The schema registry at {self.url} did not answer: "
                                f"{exc}") from exc
        if answer.status_code >= 400:
            raise DataException(_registry_error(answer))
        return answer.json()

    def register(self, subject: str, schema_type: str, text: str, lookup_only: bool) -> int:
        """The id of `text` under `subject`: registered (auto.register.schemas) or looked up."""
        key = (subject, schema_type, text)
        with self.lock:
            if key in self.ids:
                return self.ids[key]
        body: dict[str, Any] = {"schema": text}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        path = f"/subjects/{quote(subject, safe='')}"
        answer = self._call("POST", path if lookup_only else path + "/versions", body)
        with self.lock:
            self.ids[key] = int(answer["id"])
        return int(answer["id"])

    def latest(self, subject: str) -> Registered:
        answer = self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/latest")
        return Registered(int(answer["id"]), answer.get("schemaType", "AVRO"), answer["schema"],
                          tuple(answer.get("references") or ()))

    def schema(self, schema_id: int, serialized: bool = False) -> Registered:
        """Schema `schema_id`; `serialized`: Protobuf's base64 descriptor, not its text."""
        key = (schema_id, "serialized" if serialized else "")
        with self.lock:
            if key in self.by_id:
                return self.by_id[key]
        query = "?format=serialized" if serialized else ""
        answer = self._call("GET", f"/schemas/ids/{schema_id}{query}")
        found = Registered(schema_id, answer.get("schemaType", "AVRO"), answer["schema"],
                           tuple(answer.get("references") or ()))
        with self.lock:
            self.by_id[key] = found
        return found

    def version(self, subject: str, version: int, serialized: bool = False) -> Registered:
        query = "?format=serialized" if serialized else ""
        answer = self._call("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}"
                                   f"{query}")
        return Registered(int(answer["id"]), answer.get("schemaType", "AVRO"), answer["schema"],
                          tuple(answer.get("references") or ()))


def _registry_error(answer: httpx.Response) -> str:
    try:
        body = answer.json()
        return (f"Schema registry error {body.get('error_code', answer.status_code)}: "
                f"{body.get('message', answer.text)}")
    except ValueError:
        return f"Schema registry answered {answer.status_code}: {answer.text[:200]}"


_CLIENTS: dict[tuple[str, tuple[str, str] | None], RegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(url: str, auth: tuple[str, str] | None) -> RegistryClient:
    """One client (and cache) per registry URL and login in the worker process, shared by
    every converter, as Confluent's converters share theirs per configuration."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.get((url, auth))
        if client is None:
            client = _CLIENTS[(url, auth)] = RegistryClient(url, auth)
        return client


def _flag(configs: Mapping[str, Any], key: str, default: bool) -> bool:
    text = str(configs.get(key, str(default).lower())).strip().lower()
    if text not in ("true", "false"):
        raise ConfigException(f"Invalid value {text} for configuration {key}")
    return text == "true"


def _auth(configs: Mapping[str, Any]) -> tuple[str, str] | None:
    source = str(configs.get("basic.auth.credentials.source", "")).upper()
    info = str(configs.get("basic.auth.user.info", "")
               or configs.get("schema.registry.basic.auth.user.info", ""))
    if source in ("", "USER_INFO") and info:
        user, _, password = info.partition(":")
        return user, password
    return None


class RegistryConverter(Converter):
    """A converter writing and reading Confluent's wire format through a schema registry."""

    schema_type = "AVRO"

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        super().configure(configs, is_key)
        url = str(configs.get("schema.registry.url", "")).split(",")[0].strip()
        if not url:
            raise ConfigException("Missing required configuration \"schema.registry.url\" "
                                  "which has no default value.")
        self.registry = client_for(url, _auth(configs))
        self.auto_register = _flag(configs, "auto.register.schemas", True)
        self.use_latest = _flag(configs, "use.latest.version", False)
        strategy_key = "key.subject.name.strategy" if is_key else "value.subject.name.strategy"
        self.strategy = str(configs.get(strategy_key, TOPIC_NAME))
        if self.strategy not in STRATEGIES and self.strategy.rsplit(".", 1)[-1] not in {
                s.rsplit(".", 1)[-1] for s in STRATEGIES}:
            raise ConfigException(f"Invalid value {self.strategy} for configuration "
                                  f"{strategy_key}: Class could not be found.")
        self.strategy = self.strategy.rsplit(".", 1)[-1]
        self.latest: dict[str, tuple[Registered, Any]] = {}

    def subject(self, topic: str, record_name: str | None) -> str:
        suffix = "-key" if self.is_key else "-value"
        if self.strategy == "TopicNameStrategy":
            return topic + suffix
        if not record_name:
            raise DataException(f"{self.strategy} needs a named schema (a struct with a name)")
        return record_name if self.strategy == "RecordNameStrategy" else f"{topic}-{record_name}"

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None  # a tombstone stays null, as Confluent's converters write it
        if schema is None:
            raise DataException(f"{type(self).__name__} needs a schema for the value of "
                                f"topic {topic}; the connector gave none")
        text, record_name = self.schema_for(schema)
        subject = self.subject(topic, record_name)
        if self.use_latest:
            registered, parsed = self._latest(subject)
            return HEADER.pack(MAGIC, registered.id) + self.encode_with(parsed, schema, value)
        schema_id = self.registry.register(subject, self.schema_type, text,
                                           lookup_only=not self.auto_register)
        return HEADER.pack(MAGIC, schema_id) + self.encode(text, schema, value)

    def _latest(self, subject: str) -> tuple[Registered, Any]:
        if subject not in self.latest:  # Confluent's latest.cache.ttl.sec defaults to forever
            registered = self.registry.latest(subject)
            self.latest[subject] = (registered, self.parse_registered(registered))
        return self.latest[subject]

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        if len(data) < HEADER.size or data[0] != MAGIC:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to "
                                f"serialization error of topic {topic}: Unknown magic byte!")
        schema_id = HEADER.unpack_from(data)[1]
        return self.decode(schema_id, data[HEADER.size:])

    @abstractmethod
    def schema_for(self, schema: Schema) -> tuple[str, str | None]:
        """The format's schema text for a Connect schema, and its record name (or None)."""

    @abstractmethod
    def encode(self, text: str, schema: Schema, value: Any) -> bytes:
        """`value` (of Connect schema `schema`) in the format, under schema `text`."""

    @abstractmethod
    def parse_registered(self, registered: Registered) -> Any:
        """A registered schema in the form `encode_with` takes (use.latest.version)."""

    @abstractmethod
    def encode_with(self, parsed: Any, schema: Schema, value: Any) -> bytes:
        """`value` written with a registered schema that `parse_registered` read."""

    @abstractmethod
    def decode(self, schema_id: int, payload: bytes) -> tuple[Schema | None, Any]:
        """The bytes after the header, read with schema `schema_id`, as Connect data."""
