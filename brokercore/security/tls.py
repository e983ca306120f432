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

The keys are read by `sslkeys.py`, which the Connect worker's REST API shares.
"""

from __future__ import annotations

import ssl
from typing import Any

from brokercore.config import BrokerConfig, ConfigError

from .listeners import listener_config
from .sslkeys import Setting, load_keystore, load_truststore, set_protocols

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}

# RFC 2253 attribute names of the RDNs Python's getpeercert() reports by long name
_RFC2253_NAMES = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
    "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}


# The broker's config answers Kafka's default type, JKS, for an unset ssl.truststore.type.
_BROKER_TRUSTSTORE_KINDS = ("PEM", "JKS")


def _setting(config: BrokerConfig, listener: str | None) -> Setting:
    if listener:
        return lambda key: listener_config(config, listener, key)
    return config.get


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of a listener; ConfigError (or OSError for files) when unusable."""
    setting = _setting(config, listener)
    rules = (setting("ssl.principal.mapping.rules") or "DEFAULT").strip()
    if rules != "DEFAULT":  # a silently different principal would be worse than a refusal
        raise ConfigError(f"ssl.principal.mapping.rules {rules!r}: only DEFAULT (the whole "
                          "RFC 2253 DN) is supported")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    set_protocols(context, setting, ConfigError)
    try:
        load_keystore(context, setting, ConfigError)
        client_auth = (setting("ssl.client.auth") or "none").lower()
        if client_auth not in _CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth must be none, requested or required, "
                              f"not {client_auth}")
        context.verify_mode = _CLIENT_AUTH[client_auth]
        if client_auth != "none":
            load_truststore(context, setting, ssl.Purpose.CLIENT_AUTH, ConfigError,
                            _BROKER_TRUSTSTORE_KINDS)
    except ssl.SSLError as exc:
        raise ConfigError(f"listener {listener}: cannot load its TLS keys: {exc}") from None
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context this broker connects to another's `listener` with: the same listener's
    truststore checks the peer, its keystore (if any) is this broker's certificate."""
    setting = _setting(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    set_protocols(context, setting, ConfigError)
    algorithm = setting("ssl.endpoint.identification.algorithm")
    context.check_hostname = (algorithm if algorithm is not None else "https").lower() == "https"
    try:
        load_truststore(context, setting, ssl.Purpose.SERVER_AUTH, ConfigError,
                        _BROKER_TRUSTSTORE_KINDS)
        if setting("ssl.keystore.location") or setting("ssl.keystore.certificate.chain"):
            load_keystore(context, setting, ConfigError)
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
