"""A small blocking Kafka protocol connection, for the requests librdkafka does not batch.

One TCP (or TLS) socket to one broker, speaking kafka-python's protocol codec (the broker's
codec too): ApiVersions on connect, then SASL (PLAIN, SCRAM-SHA-256/512) when the config
asks for it, then requests. `send` and `receive` are split so that a caller can put several
requests in flight on several brokers before it reads any answer.

The config is librdkafka's (what every ClusterClient is given): `security.protocol`,
`sasl.mechanism(s)`, `sasl.username`, `sasl.password`, `ssl.ca.location`,
`ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`,
`ssl.endpoint.identification.algorithm`, `enable.ssl.certificate.verification`,
`client.id`. `unsupported(config)` names a key this connection cannot honour (GSSAPI,
OAUTHBEARER, a keystore, ...): callers then stay on librdkafka.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Mapping
from typing import Any

import kafka.errors
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from .errors import ClusterRequestError, ClusterUnavailable

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The librdkafka keys this connection honours; any other security key means librdkafka.
SECURITY_KEYS = {
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
    "sasl.password", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
    "ssl.key.password", "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
}
# Kafka's codes that mean "no answer to be had now", as errors._UNAVAILABLE has librdkafka's.
UNAVAILABLE_CODES = {7, 8, 13, 14, 15, 16}  # REQUEST_TIMED_OUT .. NOT_COORDINATOR
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_VERSION = 35
_SIZE = struct.Struct(">i")


def unsupported(config: Mapping[str, Any]) -> str | None:
    """Why this connection cannot speak to a cluster with `config`, or None if it can."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in PROTOCOLS:
        return f"security.protocol {protocol}"
    if protocol.startswith("SASL"):
        mechanism = _mechanism(config)
        if mechanism not in MECHANISMS:
            return f"sasl.mechanism {mechanism}"
    for key in config:
        if key.startswith(("ssl", "sasl", "enable.ssl")) and key not in SECURITY_KEYS:
            return key
    return None


def _mechanism(config: Mapping[str, Any]) -> str:
    return str(config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))).upper()


def request_error(code: int, message: str | None = None, topic: str | None = None
                  ) -> ClusterRequestError | ClusterUnavailable:
    """A Kafka error code as clusterclient's exception (the same split as errors.translate)."""
    kind = kafka.errors.for_code(code)
    name = str(kind.message or f"ERROR_{code}")
    if code in UNAVAILABLE_CODES:
        return ClusterUnavailable(message or name, code, name)
    return ClusterRequestError(code, name, message or name, topic,
                               retriable=bool(getattr(kind, "retriable", False)))


class Connection:
    """One broker, one socket; not thread-safe (GroupReader holds its lock around it)."""

    def __init__(self, host: str, port: int, config: Mapping[str, Any], timeout: float
                 ) -> None:
        self.host, self.port = host, port
        self.client_id = str(config.get("client.id", "millrace-clusterclient"))
        self.timeout = timeout
        self._correlation = 0
        self.used = time.monotonic()  # when a request last went out
        self._pending: list[tuple[int, Any, int]] = []  # (correlation id, response class, v)
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ClusterUnavailable(f"{host}:{port}: {exc}", None, "_TRANSPORT") from exc
        self.sock: socket.socket = raw
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
            if protocol.endswith("SSL"):
                try:
                    self.sock = _tls(config).wrap_socket(raw, server_hostname=host)
                except OSError as exc:  # a certificate refused, or the handshake cut off
                    raise ClusterUnavailable(f"{host}:{port}: TLS: {exc}", None,
                                             "_SSL") from exc
            self.versions = self._api_versions()
            if protocol.startswith("SASL"):
                self._authenticate(config)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._pending.clear()
        with contextlib.suppress(OSError):
            self.sock.close()

    def version(self, api: Any, wanted: int) -> int | None:
        """`wanted` if the broker serves it for `api`, else None."""
        low, high = self.versions.get(api.API_KEY, (0, -1))
        return wanted if low <= wanted <= high else None

    # --- requests --------------------------------------------------------------------
    def send(self, request: Any, response: Any, version: int) -> None:
        """Write a request; its answer is read, in order, by `receive`."""
        self._correlation += 1
        request.with_header(correlation_id=self._correlation, client_id=self.client_id)
        frame = request.encode(version=version, header=True, framed=True)
        try:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(frame)
        except OSError as exc:
            raise self._lost(exc) from exc
        self._pending.append((self._correlation, response, version))
        self.used = time.monotonic()

    def receive(self, deadline: float) -> Any:
        """The answer to the oldest request sent and not yet received."""
        correlation, response, version = self._pending.pop(0)
        try:
            size = _SIZE.unpack(self._read(4, deadline))[0]
            frame = self._read(size, deadline)
        except OSError as exc:
            raise self._lost(exc) from exc
        answer = response.decode(frame, version=version, header=True)
        if answer.header.correlation_id != correlation:
            self.close()
            raise ClusterUnavailable(
                f"{self.host}:{self.port} answered request {answer.header.correlation_id} "
                f"when {correlation} was due", None, "_BAD_MSG")
        return answer

    def call(self, request: Any, response: Any, version: int) -> Any:
        self.send(request, response, version)
        return self.receive(time.monotonic() + self.timeout)

    def _read(self, n: int, deadline: float) -> bytes:
        chunks, left = [], n
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer within {self.timeout:.0f}s")
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _lost(self, exc: OSError) -> ClusterUnavailable:
        self.close()
        code = "_TIMED_OUT" if isinstance(exc, TimeoutError) else "_TRANSPORT"
        return ClusterUnavailable(f"{self.host}:{self.port}: {exc}", None, code)

    # --- connection set-up -----------------------------------------------------------
    def _api_versions(self) -> dict[int, tuple[int, int]]:
        answer = self.call(ApiVersionsRequest(client_software_name="millrace-clusterclient",
                                              client_software_version="1"),
                           ApiVersionsResponse, 3)
        if answer.error_code:
            raise request_error(answer.error_code)
        return {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}

    def _authenticate(self, config: Mapping[str, Any]) -> None:
        mechanism = _mechanism(config)
        user = str(config.get("sasl.username", ""))
        password = str(config.get("sasl.password", ""))
        handshake = self.call(SaslHandshakeRequest(mechanism=mechanism),
                              SaslHandshakeResponse, 1)
        if handshake.error_code:
            raise request_error(handshake.error_code,
                                f"{mechanism} not enabled (the broker's: "
                                f"{', '.join(handshake.mechanisms)})")
        if mechanism == "PLAIN":
            self._sasl_round(b"\0" + user.encode() + b"\0" + password.encode())
            return
        scram = ScramClient(user, password, mechanism)
        try:
            scram.process_server_first_message(self._sasl_round(scram.first_message()))
            scram.process_server_final_message(self._sasl_round(scram.final_message()))
        except (ValueError, KeyError) as exc:  # the server's messages did not check out
            raise ClusterRequestError(SASL_AUTHENTICATION_FAILED, "SASL_AUTHENTICATION_FAILED",
                                      f"SCRAM with {self.host}:{self.port}: {exc}") from exc

    def _sasl_round(self, token: bytes) -> bytes:
        answer = self.call(SaslAuthenticateRequest(auth_bytes=token),
                           SaslAuthenticateResponse, 2)
        if answer.error_code:
            raise request_error(answer.error_code, answer.error_message)
        return bytes(answer.auth_bytes)


def _tls(config: Mapping[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.get("ssl.ca.location") or None)
    identification = str(config.get("ssl.endpoint.identification.algorithm", "https")).lower()
    context.check_hostname = identification == "https"  # librdkafka's default since 2.0
    if str(config.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        context.verify_mode = ssl.CERT_NONE  # as librdkafka is told: any certificate
    certificate = config.get("ssl.certificate.location")
    if certificate:
        context.load_cert_chain(certificate, config.get("ssl.key.location") or None,
                                config.get("ssl.key.password") or None)
    return context
