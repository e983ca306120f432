"""Listener TLS contexts from Kafka's keys, over real TLS connections on 127.0.0.1: each
keystore form serves a handshake, and a client certificate's subject becomes the
principal in RFC 2253 order (CN first)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from brokercore.config import BrokerConfig, ConfigError
from brokercore.security.tls import certificate_principal, server_context
from tests.brokercore.security.certs import TestCA


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ca"))


async def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str | None:
    """The principal the server side sees for the client's certificate."""
    seen: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.set_result(certificate_principal(writer.get_extra_info("peercert")))
        writer.close()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server)
    port = listening.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client,
                                              server_hostname="localhost")
    principal = await asyncio.wait_for(seen, 10)
    writer.close()
    listening.close()
    return principal


def _client(ca: TestCA, with_certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.ca_file)
    if with_certificate:
        alice = ca.issue("alice", "alice", "Example")
        context.load_cert_chain(alice.cert, alice.key)
    return context


def _config(**keys: str) -> BrokerConfig:
    return BrokerConfig({key.replace("_", "."): value for key, value in keys.items()})


def test_a_client_certificate_is_the_principal_in_rfc_2253_order(ca: TestCA) -> None:
    broker = ca.issue("broker", "localhost", "Millrace")
    config = _config(ssl_keystore_type="PEM", ssl_keystore_location=str(ca.keystore_pem(broker)),
                     ssl_truststore_type="PEM", ssl_truststore_location=str(ca.ca_file),
                     ssl_client_auth="required")
    principal = asyncio.run(_handshake(server_context(config, "SSL"), _client(ca, True)))
    assert principal == "User:CN=alice,O=Example"


def test_requested_client_auth_lets_a_client_without_a_certificate_in(ca: TestCA) -> None:
    broker = ca.issue("broker", "localhost", "Millrace")
    config = BrokerConfig({
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.certificate.chain": broker.cert.read_text(),
        "listener.name.secure.ssl.keystore.key": broker.key.read_text(),
        "listener.name.secure.ssl.truststore.certificates": ca.ca_file.read_text(),
        "listener.name.secure.ssl.client.auth": "requested",
    })
    context = server_context(config, "SECURE")
    assert asyncio.run(_handshake(context, _client(ca, False))) is None
    assert asyncio.run(_handshake(context, _client(ca, True))) == "User:CN=alice,O=Example"


def test_a_pkcs12_keystore_serves_tls(ca: TestCA) -> None:
    broker = ca.issue("broker12", "localhost", "Millrace")
    config = _config(ssl_keystore_type="PKCS12",
                     ssl_keystore_location=str(ca.pkcs12(broker, "changeit")),
                     ssl_keystore_password="changeit", ssl_enabled_protocols="TLSv1.3")
    context = server_context(config, "SSL")
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert asyncio.run(_handshake(context, _client(ca, False))) is None


@pytest.mark.parametrize("keys, words", [
    ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"}, "use PEM or PKCS12"),
    ({"ssl.keystore.type": "PEM"}, "needs ssl.keystore.location"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}",
      "ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.1 is not supported"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}",
      "ssl.client.auth": "maybe"}, "ssl.client.auth"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "{pem}",
      "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT"}, "only DEFAULT"),
])
def test_unusable_keys_are_refused_by_name(ca: TestCA, keys: dict[str, str],
                                           words: str) -> None:
    pem = str(ca.keystore_pem(ca.issue("broker", "localhost")))
    with pytest.raises(ConfigError, match=words):
        config = BrokerConfig({key: value.replace("{pem}", pem) for key, value in keys.items()})
        server_context(config, "SSL")


def test_rdn_values_are_escaped_as_rfc_2253_says(tmp_path: Path) -> None:
    subject = ((("countryName", "NZ"),), (("organizationName", "A, B+C"),),
               (("commonName", " lead"),))
    assert certificate_principal({"subject": subject}) == r"User:CN=\ lead,O=A\, B\+C,C=NZ"
    assert certificate_principal({}) is None
