"""TLS on the worker's REST API, with Kafka Connect's keys (README.md, "Securing the REST
API").

`listeners=https://host:port` serves the API over TLS. Its settings are Kafka's `ssl.*` keys,
prefixed `listeners.https.` when the REST API needs other settings than the worker's Kafka
clients; as in Kafka, the prefix is all or nothing: once any `listeners.https.*` key is set,
the unprefixed `ssl.*` keys are ignored for the API.

- `ssl.keystore.type` PEM or PKCS12 (JKS needs a Java keystore reader: refused, by name).
  PEM: `ssl.keystore.location` is one file with the private key and the certificate chain,
  or `ssl.keystore.certificate.chain` and `ssl.keystore.key` hold them inline; an encrypted
  key's password is `ssl.key.password`. PKCS12: `ssl.keystore.location` and
  `ssl.keystore.password`, read with `cryptography`.
- `ssl.client.auth` none | requested | required, checked against `ssl.truststore.*` (PEM).
- `ssl.enabled.protocols` (TLSv1.2,TLSv1.3 by default).

The worker's own requests to other workers (forwarding to the leader, task configs) trust
the worker's unprefixed `ssl.truststore.*` (PEM; unset: the system's CAs), as Kafka's
RestClient does, and check the name (`ssl.endpoint.identification.algorithm`, https).

`ssl` loads certificates and keys from files only, so inline PEM and PKCS12 contents are
written to a private temporary file that is removed as soon as they are loaded.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from connect.configdef import ConfigException

HTTPS_PREFIX = "listeners.https."
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


def https_settings(props: dict[str, str]) -> dict[str, str]:
    """The REST API's `ssl.*` settings: the `listeners.https.`-prefixed ones if any is set,
    else the worker's unprefixed ones (Kafka's valuesWithPrefixAllOrNothing)."""
    prefixed = {k.removeprefix(HTTPS_PREFIX): v for k, v in props.items()
                if k.startswith(HTTPS_PREFIX)}
    if prefixed:
        return prefixed
    return {k: v for k, v in props.items() if k.startswith("ssl.")}


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        yield path
    finally:
        os.unlink(path)


def _key(settings: dict[str, str], key: str) -> str:
    return settings.get(key, "").strip()


def _load_keystore(context: ssl.SSLContext, settings: dict[str, str]) -> None:
    kind = (_key(settings, "ssl.keystore.type") or "JKS").upper()
    location = _key(settings, "ssl.keystore.location")
    password = settings.get("ssl.key.password") or None
    if kind == "PEM":
        chain, key = _key(settings, "ssl.keystore.certificate.chain"), _key(
            settings, "ssl.keystore.key")
        if chain and key:
            with _private_file(f"{key}\n{chain}\n".encode()) as path:
                context.load_cert_chain(path, password=password)
        elif location:
            context.load_cert_chain(location, password=password)
        else:
            raise ConfigException("listeners https: ssl.keystore.type PEM needs "
                                  "ssl.keystore.location, or ssl.keystore.certificate.chain "
                                  "and ssl.keystore.key")
    elif kind == "PKCS12":
        if not location:
            raise ConfigException("listeners https: ssl.keystore.type PKCS12 needs "
                                  "ssl.keystore.location")
        pem = _pkcs12_as_pem(Path(location), settings.get("ssl.keystore.password") or None)
        with _private_file(pem) as path:
            context.load_cert_chain(path)
    else:
        raise ConfigException(f"listeners https: ssl.keystore.type {kind} is not supported: "
                              "use PEM or PKCS12")


def _pkcs12_as_pem(location: Path, password: str | None) -> bytes:
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            location.read_bytes(), password.encode() if password else None)
    except ValueError as exc:
        raise ConfigException(f"ssl.keystore.location {location}: {exc}") from None
    if key is None or cert is None:
        raise ConfigException(f"ssl.keystore.location {location}: no private key and "
                              "certificate")
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    for certificate in (cert, *extra):
        pem += certificate.public_bytes(Encoding.PEM)
    return pem


def _load_truststore(context: ssl.SSLContext, settings: dict[str, str],
                     purpose: ssl.Purpose) -> None:
    kind = (_key(settings, "ssl.truststore.type") or "PEM").upper()
    location = _key(settings, "ssl.truststore.location")
    inline = _key(settings, "ssl.truststore.certificates")
    if (location or inline) and kind != "PEM":
        raise ConfigException(f"ssl.truststore.type {kind} is not supported: use PEM")
    if inline:
        context.load_verify_locations(cadata=inline)
    elif location:
        context.load_verify_locations(cafile=location)
    else:
        context.load_default_certs(purpose)


def _set_protocols(context: ssl.SSLContext, settings: dict[str, str]) -> None:
    raw = _key(settings, "ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    names = [item.strip() for item in raw.split(",") if item.strip()]
    unknown = [n for n in names if n not in _PROTOCOLS]
    if unknown or not names:
        raise ConfigException(f"Invalid value {raw} for configuration ssl.enabled.protocols: "
                              f"one or more of {', '.join(_PROTOCOLS)}")
    versions = [_PROTOCOLS[n] for n in names]
    context.minimum_version, context.maximum_version = min(versions), max(versions)


def server_context(props: dict[str, str]) -> ssl.SSLContext:
    """The REST API's TLS context for `listeners=https://...`; ConfigException when the
    settings cannot give one (a missing file, a key that does not load)."""
    settings = https_settings(props)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, settings)
    client_auth = (_key(settings, "ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigException(f"Invalid value {client_auth} for configuration "
                              "ssl.client.auth: none, requested or required")
    try:
        _load_keystore(context, settings)
        context.verify_mode = _CLIENT_AUTH[client_auth]
        if client_auth != "none":
            _load_truststore(context, settings, ssl.Purpose.CLIENT_AUTH)
    except (OSError, ssl.SSLError) as exc:  # SSLError is an OSError; said for the reader
        raise ConfigException(f"listeners https: cannot load the REST API's TLS keys: "
                              f"{exc}") from None
    return context


def client_context(props: dict[str, str]) -> ssl.SSLContext:
    """What the worker's requests to other workers' HTTPS APIs trust: its own unprefixed
    truststore (the one it trusts its brokers with), or the system's CAs. A worker that
    asks client certificates of its callers (`ssl.client.auth`) presents its own REST
    keystore to its peers, which ask the same."""
    settings = {k: v for k, v in props.items() if k.startswith("ssl.")}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(context, settings)
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https")
    context.check_hostname = algorithm.strip().lower() == "https"
    if not context.check_hostname:
        context.verify_mode = ssl.CERT_REQUIRED  # the chain is still checked
    try:
        _load_truststore(context, settings, ssl.Purpose.SERVER_AUTH)
        served = https_settings(props)
        if (_key(served, "ssl.client.auth") or "none").lower() != "none":
            _load_keystore(context, served)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigException(f"cannot load the TLS settings for requests to other "
                              f"workers: {exc}") from None
    return context


def peer_verify(props: dict[str, str], scheme: str) -> ssl.SSLContext | bool:
    """httpx's `verify` for the worker's requests to other workers: `client_context` when
    the worker serves HTTPS (so do its peers: one group, one scheme), else True (the
    system's CAs, for an https URL met anyway), leaving a plain-HTTP worker's `ssl.*` keys
    to its Kafka clients alone."""
    return client_context(props) if scheme == "https" else True
