"""TLS for listeners and for this broker's own connections, with the standard library's `ssl`.

Kafka's keys, per listener (`listener.name.<l>.ssl.*`, falling back to `ssl.*`):

- `ssl.keystore.type` PEM or PKCS12 (JKS needs a Java keystore reader: refused, by name).
  PEM: `ssl.keystore.location` is one file with the private key and the certificate chain,
  or `ssl.keystore.certificate.chain` and `ssl.keystore.key` hold them inline; an
  encrypted key's password is `ssl.key.password`. PKCS12: `ssl.keystore.location` and
  `ssl.keystore.password`, read with `cryptography`.
- `ssl.truststore.type` PEM: `ssl.truststore.location` (a file of CA certificates) or
  `ssl.truststore.certificates` (inline). Unset: the system's CAs.
- `ssl.client.auth` none | requested | required; with a client certificate the
  connection's principal is its subject DN in RFC 2253 form (`ssl.principal.mapping.rules`
  DEFAULT): `User:CN=alice,O=Example`.
- `ssl.enabled.protocols` (TLSv1.2,TLSv1.3 by default).

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
from typing import Any

from brokercore.config import BrokerConfig, ConfigError

from .listeners import listener_config

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}

# RFC 2253 attribute names of the RDNs Python's getpeercert() reports by long name
_RFC2253_NAMES = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
    "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        yield path
    finally:
        os.unlink(path)


def _get(config: BrokerConfig, listener: str | None, key: str) -> str | None:
    return listener_config(config, listener, key) if listener else config.get(key)


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig,
                   listener: str | None) -> None:
    kind = (_get(config, listener, "ssl.keystore.type") or "JKS").upper()
    location = _get(config, listener, "ssl.keystore.location")
    key_password = _get(config, listener, "ssl.key.password")
    if kind == "PEM":
        chain = _get(config, listener, "ssl.keystore.certificate.chain")
        key = _get(config, listener, "ssl.keystore.key")
        if chain and key:
            with _private_file(f"{key.strip()}\n{chain.strip()}\n".encode()) as path:
                context.load_cert_chain(path, password=key_password)
        elif location:
            context.load_cert_chain(location, password=key_password)
        else:
            raise ConfigError("ssl.keystore.type PEM needs ssl.keystore.location or "
                              "ssl.keystore.certificate.chain and ssl.keystore.key")
    elif kind == "PKCS12":
        if not location:
            raise ConfigError("ssl.keystore.type PKCS12 needs ssl.keystore.location")
        password = _get(config, listener, "ssl.keystore.password")
        with _private_file(_pkcs12_as_pem(Path(location), password)) as path:
            context.load_cert_chain(path)
    else:
        raise ConfigError(f"ssl.keystore.type {kind} is not supported: use PEM or PKCS12")


def _pkcs12_as_pem(location: Path, password: str | None) -> bytes:
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    key, cert, extra = pkcs12.load_key_and_certificates(
        location.read_bytes(), password.encode() if password else None)
    if key is None or cert is None:
        raise ConfigError(f"ssl.keystore.location {location}: no private key and certificate")
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    for certificate in (cert, *extra):
        pem += certificate.public_bytes(Encoding.PEM)
    return pem


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig,
                     listener: str | None, purpose: ssl.Purpose) -> None:
    kind = (_get(config, listener, "ssl.truststore.type") or "PEM").upper()
    location = _get(config, listener, "ssl.truststore.location")
    inline = _get(config, listener, "ssl.truststore.certificates")
    if (location or inline) and kind not in ("PEM", "JKS"):
        raise ConfigError(f"ssl.truststore.type {kind} is not supported: use PEM")
    if inline:
        context.load_verify_locations(cadata=inline)
    elif location:
        context.load_verify_locations(cafile=location)
    else:
        context.load_default_certs(purpose)


def _set_protocols(context: ssl.SSLContext, config: BrokerConfig, listener: str | None) -> None:
    raw = _get(config, listener, "ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    versions = []
    for name in (item.strip() for item in raw.split(",") if item.strip()):
        if name not in _PROTOCOLS:
            raise ConfigError(f"ssl.enabled.protocols: {name} is not supported "
                              f"(one of {', '.join(_PROTOCOLS)})")
        versions.append(_PROTOCOLS[name])
    if not versions:
        raise ConfigError("ssl.enabled.protocols is empty")
    context.minimum_version, context.maximum_version = min(versions), max(versions)


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of a listener; ConfigError (or OSError for files) when unusable."""
    rules = (_get(config, listener, "ssl.principal.mapping.rules") or "DEFAULT").strip()
    if rules != "DEFAULT":  # a silently different principal would be worse than a refusal
        raise ConfigError(f"ssl.principal.mapping.rules {rules!r}: only DEFAULT (the whole "
                          "RFC 2253 DN) is supported")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, config, listener)
    try:
        _load_keystore(context, config, listener)
        client_auth = (_get(config, listener, "ssl.client.auth") or "none").lower()
        if client_auth not in _CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth must be none, requested or required, "
                              f"not {client_auth}")
        context.verify_mode = _CLIENT_AUTH[client_auth]
        if client_auth != "none":
            _load_truststore(context, config, listener, ssl.Purpose.CLIENT_AUTH)
    except ssl.SSLError as exc:
        raise ConfigError(f"listener {listener}: cannot load its TLS keys: {exc}") from None
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context this broker connects to another's `listener` with: the same listener's
    truststore checks the peer, its keystore (if any) is this broker's certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(context, config, listener)
    algorithm = _get(config, listener, "ssl.endpoint.identification.algorithm")
    context.check_hostname = (algorithm if algorithm is not None else "https").lower() == "https"
    try:
        _load_truststore(context, config, listener, ssl.Purpose.SERVER_AUTH)
        if _get(config, listener, "ssl.keystore.location") or _get(
                config, listener, "ssl.keystore.certificate.chain"):
            _load_keystore(context, config, listener)
    except ssl.SSLError as exc:
        raise ConfigError(f"listener {listener}: cannot load its TLS keys: {exc}") from None
    return context


def _escape(value: str) -> str:
    escaped = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and len(escaped) > 1:
        escaped = escaped[:-1] + "\\ "
    return escaped


def certificate_principal(peercert: dict[str, Any] | None) -> str | None:
    """`User:<subject DN in RFC 2253 form>` of a peer certificate, None without one.

    getpeercert() lists the RDNs in the certificate's (ASN.1) order, RFC 2253 the other
    way round."""
    if not peercert or not peercert.get("subject"):
        return None
    rdns = []
    for rdn in reversed(peercert["subject"]):
        rdns.append("+".join(f"{_RFC2253_NAMES.get(name, name)}={_escape(value)}"
                             for name, value in rdn))
    return "User:" + ",".join(rdns)
