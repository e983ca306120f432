"""SCRAM against RFC 7677's worked example, and the exchange's refusals (no sockets)."""

import base64

import pytest

from brokercore.security.scram import (
    ScramClient,
    ScramCredential,
    ScramError,
    ScramServer,
    credential_from_salted,
    decode_username,
    encode_username,
    parse_add_scram,
    salted_password,
)

CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def _pencil() -> ScramCredential:
    salted = salted_password("SCRAM-SHA-256", "pencil", SALT, 4096)
    return credential_from_salted("SCRAM-SHA-256", salted, SALT, 4096)


def _server() -> ScramServer:
    credential = _pencil()
    return ScramServer("SCRAM-SHA-256",
                       lambda user, mechanism: credential if user == "user" else None,
                       nonce=SERVER_NONCE)


def test_it_follows_rfc_7677s_example_on_both_sides() -> None:
    server, client = _server(), ScramClient("SCRAM-SHA-256", "user", "pencil", CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate(client.first())
    assert server_first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    client_final = client.final(server_first)
    assert client_final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server_final = server.evaluate(client_final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify(server_final)
    assert server.complete and server.username == "user"


@pytest.mark.parametrize("user, password", [("user", "pen"), ("nobody", "pencil")])
def test_a_wrong_password_and_an_unknown_user_fail_alike(user: str, password: str) -> None:
    server, client = _server(), ScramClient("SCRAM-SHA-256", user, password)
    server_first = server.evaluate(client.first())
    with pytest.raises(ScramError, match="Invalid user credentials"):
        server.evaluate(client.final(server_first))
    assert not server.complete


@pytest.mark.parametrize("first", [
    b"", b"\xff\xfe", b"p=tls-server-end-point,,n=user,r=abc", b"n,,n=user", b"n,,r=abc",
    b"n,,garbage", b"n,a=other,n=user,r=abc", b"n,,n=us=er,r=abc",
])
def test_a_malformed_client_first_message_is_refused(first: bytes) -> None:
    with pytest.raises(ScramError):
        _server().evaluate(first)


def test_a_replayed_or_tampered_final_message_is_refused() -> None:
    server, client = _server(), ScramClient("SCRAM-SHA-256", "user", "pencil")
    final = client.final(server.evaluate(client.first()))
    with pytest.raises(ScramError, match="nonce"):
        server.evaluate(final.replace(b",p=", b"x,p="))
    other = _server()
    other.evaluate(b"n,,n=user,r=abc")
    with pytest.raises(ScramError, match="base64"):
        other.evaluate(b"c=biws,r=abc" + SERVER_NONCE.encode() + b",p=!!")


def test_a_nonce_sent_with_the_clients_part_twice_is_accepted_as_kafka_does() -> None:
    """librdkafka before 2.1 (Debian's kcat) repeats the client nonce in its final
    message; Kafka only checks that the nonce ends with the server's."""
    server, client = _server(), ScramClient("SCRAM-SHA-256", "user", "pencil", CLIENT_NONCE)
    final = client.final(server.evaluate(client.first()))
    repeated = final.replace(b"r=", b"r=" + CLIENT_NONCE.encode())
    with pytest.raises(ScramError, match="Invalid user credentials"):
        server.evaluate(repeated)  # the nonce passes; the proof was made for the other text


def test_usernames_are_escaped_as_rfc_5802_says() -> None:
    assert encode_username("a=b,c") == "a=3Db=2Cc"
    assert decode_username("a=3Db=2Cc") == "a=b,c"


def test_add_scram_reads_kafka_storages_argument() -> None:
    assert parse_add_scram('SCRAM-SHA-512=[name=admin,password="secret"]') == (
        "SCRAM-SHA-512", "admin", "secret", 4096)
    assert parse_add_scram("SCRAM-SHA-256=[name=admin,password=secret,iterations=8192]") == (
        "SCRAM-SHA-256", "admin", "secret", 8192)
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=name=a",
                "SCRAM-SHA-256=[password=b]", "SCRAM-SHA-256=[name=a,password=b,iterations=99]"):
        with pytest.raises(ValueError):
            parse_add_scram(bad)
