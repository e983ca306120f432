"""Bad input on secured listeners: malformed SASL tokens, a disabled mechanism, requests
out of order, TLS where plaintext is spoken and the reverse, a certificate the broker's CA
never signed. Each gets the protocol's error and a closed connection, is logged once, and
the broker serves on. Also Kafka's session lifetime (connections.max.reauth.ms)."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from brokercore.protocol.errors import ErrorCode
from brokercore.security.scram import ScramClient
from tests.brokercore.wire import WireClient
from tests.securebroker import SecuredBroker, start_secured_broker

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
REAUTH_MS = 3000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    secured = start_secured_broker(tmp_path_factory.mktemp("bad-input"), {
        "listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS)})
    yield secured
    secured.process.stop()


def _client(broker: SecuredBroker, listener: str = "SASL_PLAINTEXT") -> WireClient:
    return WireClient(broker.bootstrap(listener))


def _logged_once(broker: SecuredBroker, client: WireClient | int, words: str) -> None:
    """The broker wrote one line about this connection, and it says `words`."""
    port = client if isinstance(client, int) else client.sock.getsockname()[1]
    peer = f"127.0.0.1:{port}"
    for _ in range(50):
        lines = [line for line in broker.process.log().splitlines() if peer in line]
        if lines:
            break
        time.sleep(0.1)
    assert len(lines) == 1 and words in lines[0], lines


def _metadata(client: WireClient) -> object:
    return client.request(MetadataRequest(topics=[]), version=4)


def _serves_on(broker: SecuredBroker) -> None:
    with WireClient(broker.bootstrap("PLAINTEXT")) as client:
        assert client.request(ApiVersionsRequest(), version=3).error_code == ErrorCode.NONE


def test_a_malformed_plain_token_fails_authentication_and_closes(broker: SecuredBroker) -> None:
    with _client(broker) as client:
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"only-one-part"), 2)
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "expected 3 tokens" in answer.error_message
        assert client.is_closed_by_peer()
        _logged_once(broker, client, "expected 3 tokens")
    _serves_on(broker)


@pytest.mark.parametrize("token", [b"\xff\xfe\x00garbage", b"n,,n=alice", b"p=x,,n=a,r=b", b""])
def test_a_malformed_scram_token_fails_authentication_and_closes(
        broker: SecuredBroker, token: bytes) -> None:
    with _client(broker) as client:
        assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1).error_code == 0
        answer = client.request(SaslAuthenticateRequest(auth_bytes=token), 1)
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert client.is_closed_by_peer()
        _logged_once(broker, client, "SASL")
    _serves_on(broker)


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "plain"])
def test_a_disabled_mechanism_gets_the_enabled_list_and_a_closed_connection(
        broker: SecuredBroker, mechanism: str) -> None:
    with _client(broker) as client:
        answer = client.request(SaslHandshakeRequest(mechanism=mechanism), 1)
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == MECHANISMS
        assert client.is_closed_by_peer()
        _logged_once(broker, client, f"Unsupported SASL mechanism {mechanism}")


def test_nothing_but_api_versions_is_served_before_authentication(broker: SecuredBroker) -> None:
    with _client(broker) as client:
        assert client.request(ApiVersionsRequest(), version=3).error_code == ErrorCode.NONE
        client.correlation_id += 1
        request = MetadataRequest(topics=[])
        request.with_header(correlation_id=client.correlation_id, client_id="wire-test")
        client.send_raw(bytes(request.encode(version=4, header=True, framed=True)))
        assert client.is_closed_by_peer()
        _logged_once(broker, client, "Metadata request during SASL handshake")


def test_authenticate_before_handshake_is_an_illegal_state(broker: SecuredBroker) -> None:
    with _client(broker) as client:
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 1)
        assert answer.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert client.is_closed_by_peer()


def test_handshake_v0_takes_bare_tokens_as_aiokafka_sends_them(broker: SecuredBroker) -> None:
    with _client(broker) as client:
        assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0).error_code == 0
        scram = ScramClient("SCRAM-SHA-512", "scram512", "s512-secret")
        token = scram.first()
        client.send_raw(struct.pack(">i", len(token)) + token)
        final = scram.final(client.read_frame())
        client.send_raw(struct.pack(">i", len(final)) + final)
        scram.verify(client.read_frame())
        assert _metadata(client).brokers  # type: ignore[attr-defined]
    with _client(broker) as client:
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        client.send_raw(struct.pack(">i", 5) + b"\0a\0b!")
        assert client.is_closed_by_peer()
        _logged_once(broker, client, "Invalid username or password")


def _authenticate(client: WireClient, user: str = "alice", password: str = "alice-secret"
                  ) -> int:
    assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    answer = client.request(SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{password}".encode()), 1)
    assert answer.error_code == ErrorCode.NONE, answer
    return int(answer.session_lifetime_ms)


def test_an_expired_session_is_closed_and_a_reauthenticated_one_is_not(
        broker: SecuredBroker) -> None:
    with _client(broker) as renewed, _client(broker) as lapsed:
        assert _authenticate(renewed) == REAUTH_MS
        assert _authenticate(lapsed) == REAUTH_MS
        time.sleep(REAUTH_MS / 2000)
        assert _authenticate(renewed) == REAUTH_MS  # KIP-368 re-authentication
        # lapsed: past its lifetime by 0.1 s at least; renewed: 1.4 s short of its new one,
        # a margin for a loaded machine between the re-authentication and the next request
        time.sleep(REAUTH_MS / 2000 + 0.1)
        assert _metadata(renewed).brokers  # type: ignore[attr-defined]
        client = lapsed
        request = MetadataRequest(topics=[])
        request.with_header(correlation_id=99, client_id="wire-test")
        client.send_raw(bytes(request.encode(version=4, header=True, framed=True)))
        assert client.is_closed_by_peer()
        _logged_once(broker, client, "expired")


def test_reauthentication_cannot_change_the_principal(broker: SecuredBroker) -> None:
    with _client(broker) as client:
        _authenticate(client)
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), 1)
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in answer.error_message
        assert client.is_closed_by_peer()


def test_a_tls_client_hello_on_a_plaintext_listener_is_closed(broker: SecuredBroker) -> None:
    for listener in ("PLAINTEXT", "SASL_PLAINTEXT"):
        raw = socket.create_connection(("127.0.0.1", broker.ports[listener]), timeout=10)
        port = raw.getsockname()[1]
        context = ssl.create_default_context(cafile=broker.ca_file)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            context.wrap_socket(raw, server_hostname="localhost")
        raw.close()
        _logged_once(broker, port, f"a TLS handshake on a {listener} listener")
    _serves_on(broker)


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_plaintext_kafka_on_a_tls_listener_is_closed(broker: SecuredBroker,
                                                    listener: str) -> None:
    with _client(broker, listener) as client:
        client.correlation_id += 1
        request = ApiVersionsRequest()
        request.with_header(correlation_id=1, client_id="wire-test")
        client.send_raw(bytes(request.encode(version=3, header=True, framed=True)))
        assert client.is_closed_by_peer()
        _logged_once(broker, client, "TLS handshake")
    _serves_on(broker)


@pytest.mark.parametrize("certificate", ["self-signed", "expired", "none"])
def test_mtls_refuses_a_client_without_a_valid_certificate_the_ca_signed(
        broker: SecuredBroker, certificate: str) -> None:
    context = ssl.create_default_context(cafile=broker.ca_file)
    if certificate != "none":
        pair = broker.stranger if certificate == "self-signed" else broker.expired
        context.load_cert_chain(pair.cert, pair.key)
    raw = socket.create_connection(("127.0.0.1", broker.ports["SSL"]), timeout=10)
    port = raw.getsockname()[1]
    with pytest.raises((ssl.SSLError, ConnectionError)):
        tls = context.wrap_socket(raw, server_hostname="localhost")
        # TLS 1.3: the client finishes first; the broker's refusal arrives with the next read
        request = ApiVersionsRequest()
        request.with_header(correlation_id=1, client_id="wire-test")
        tls.sendall(bytes(request.encode(version=3, header=True, framed=True)))
        if not tls.recv(4):
            raise ConnectionError("closed")
    raw.close()
    _logged_once(broker, port, "TLS handshake")
    _serves_on(broker)
