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

The keys are read as the broker reads its listeners' (`brokercore.security.sslkeys`, one
implementation of Kafka's `ssl.*` semantics for both).
"""

from __future__ import annotations

import ssl

from brokercore.security.sslkeys import Setting, load_keystore, load_truststore, set_protocols
from connect.configdef import ConfigException

HTTPS_PREFIX = "listeners.https."
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


def _refuse(message: str) -> ConfigException:
    return ConfigException(f"listeners https: {message}")


def _setting(settings: dict[str, str]) -> Setting:
    return lambda key: settings.get(key)


def server_context(props: dict[str, str]) -> ssl.SSLContext:
    """The REST API's TLS context for `listeners=https://...`; ConfigException when the
    settings cannot give one (a missing file, a key that does not load)."""
    settings = https_settings(props)
    setting = _setting(settings)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    set_protocols(context, setting, _refuse)
    client_auth = (settings.get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        raise ConfigException(f"Invalid value {client_auth} for configuration "
                              "ssl.client.auth: none, requested or required")
    try:
        load_keystore(context, setting, _refuse)
        context.verify_mode = _CLIENT_AUTH[client_auth]
        if client_auth != "none":
            load_truststore(context, setting, ssl.Purpose.CLIENT_AUTH, _refuse)
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
    set_protocols(context, _setting(settings), _refuse)
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https")
    context.check_hostname = algorithm.strip().lower() == "https"
    if not context.check_hostname:
        context.verify_mode = ssl.CERT_REQUIRED  # the chain is still checked
    try:
        load_truststore(context, _setting(settings), ssl.Purpose.SERVER_AUTH, _refuse)
        served = https_settings(props)
        if (served.get("ssl.client.auth") or "none").strip().lower() != "none":
            load_keystore(context, _setting(served), _refuse)
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
