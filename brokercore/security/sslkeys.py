"""Kafka's `ssl.*` keys read into a standard library `ssl.SSLContext`: the keystore, the
truststore and the enabled protocols, as the broker's listeners (`tls.py`) and the Connect
worker's REST API (`connect/rest_tls.py`) both read them.

Only the standard library and `cryptography`: the Connect worker imports this module and no
other broker code (the import contracts in pyproject.toml keep it so). `ssl` loads
certificates and keys from files only, so inline PEM and PKCS12 contents are written to a
private temporary file that is removed as soon as they are loaded.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

# A Kafka `ssl.*` key's value (None when unset) in whatever holds the settings: a listener's
# broker config here, a Connect worker's REST settings.
Setting = Callable[[str], "str | None"]
# How the caller reports an unusable setting (the broker: ConfigError; Connect: its
# ConfigException).
Refusal = Callable[[str], Exception]


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        yield path
    finally:
        os.unlink(path)


def load_keystore(context: ssl.SSLContext, setting: Setting, refuse: Refusal) -> None:
    """The certificate chain and key of `ssl.keystore.*` (PEM file or inline, or PKCS12)."""
    kind = (setting("ssl.keystore.type") or "JKS").strip().upper()
    location = (setting("ssl.keystore.location") or "").strip()
    key_password = setting("ssl.key.password") or None
    if kind == "PEM":
        chain = (setting("ssl.keystore.certificate.chain") or "").strip()
        key = (setting("ssl.keystore.key") or "").strip()
        if chain and key:
            with _private_file(f"{key}\n{chain}\n".encode()) as path:
                context.load_cert_chain(path, password=key_password)
        elif location:
            context.load_cert_chain(location, password=key_password)
        else:
            raise refuse("ssl.keystore.type PEM needs ssl.keystore.location or "
                         "ssl.keystore.certificate.chain and ssl.keystore.key")
    elif kind == "PKCS12":
        if not location:
            raise refuse("ssl.keystore.type PKCS12 needs ssl.keystore.location")
        pem = _pkcs12_as_pem(Path(location), setting("ssl.keystore.password") or None, refuse)
        with _private_file(pem) as path:
            context.load_cert_chain(path)
    else:
        raise refuse(f"ssl.keystore.type {kind} is not supported: use PEM or PKCS12")


def _pkcs12_as_pem(location: Path, password: str | None, refuse: Refusal) -> bytes:
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(
            location.read_bytes(), password.encode() if password else None)
    except ValueError as exc:  # a wrong password or not a PKCS12 file
        raise refuse(f"ssl.keystore.location {location}: {exc}") from None
    if key is None or cert is None:
        raise refuse(f"ssl.keystore.location {location}: no private key and certificate")
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    for certificate in (cert, *extra):
        pem += certificate.public_bytes(Encoding.PEM)
    return pem


def load_truststore(context: ssl.SSLContext, setting: Setting, purpose: ssl.Purpose,
                    refuse: Refusal, kinds: tuple[str, ...] = ("PEM",)) -> None:
    """The CAs of `ssl.truststore.*` (PEM, a file or inline), or the system's when none is
    set. `kinds` are the types read as PEM."""
    kind = (setting("ssl.truststore.type") or "PEM").strip().upper()
    location = (setting("ssl.truststore.location") or "").strip()
    inline = (setting("ssl.truststore.certificates") or "").strip()
    if (location or inline) and kind not in kinds:
        raise refuse(f"ssl.truststore.type {kind} is not supported: use PEM")
    if inline:
        context.load_verify_locations(cadata=inline)
    elif location:
        context.load_verify_locations(cafile=location)
    else:
        context.load_default_certs(purpose)


def set_protocols(context: ssl.SSLContext, setting: Setting, refuse: Refusal) -> None:
    """`ssl.enabled.protocols` (TLSv1.2,TLSv1.3 by default) as the context's version range."""
    raw = setting("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    versions = []
    for name in (item.strip() for item in raw.split(",") if item.strip()):
        if name not in _PROTOCOLS:
            raise refuse(f"ssl.enabled.protocols: {name} is not supported "
                         f"(one of {', '.join(_PROTOCOLS)})")
        versions.append(_PROTOCOLS[name])
    if not versions:
        raise refuse("ssl.enabled.protocols is empty")
    context.minimum_version, context.maximum_version = min(versions), max(versions)
