"""What the stream views hand sparkkafka to reach the registry: its URL, and under
`platform --secure` (HTTPS and HTTP Basic) the login and the CA, in Confluent's client keys.
No Spark here: tests/httpauth/test_real_http.py decodes through a real HTTPS registry with
these keys."""

from __future__ import annotations

from typing import Any

import pytest

from controlcenter.streams import sql, supervise, views
from controlcenter.streams.models import StreamQuery
from sparkkafka.schema_registry import Registry, SchemaError, as_registry

SERVICE_LOGIN = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                 "sasl.username": "millrace", "sasl.password": "s3cret",
                 "ssl.ca.location": "/data/secure/ca.crt"}


def test_a_secured_platform_s_views_log_in_with_the_services_login_and_ca(settings: Any
                                                                           ) -> None:
    settings.SCHEMA_REGISTRY_URL = "https://127.0.0.1:8081"
    settings.KAFKA_CLIENT_CONFIG = SERVICE_LOGIN
    settings.MILLRACE_HTTP_TLS_CA = "/data/secure/ca.crt"
    expected = {"basic.auth.user.info": "millrace:s3cret",
                "ssl.ca.location": "/data/secure/ca.crt"}
    assert supervise.registry_config() == expected
    # the ad-hoc queries' and validation's views, and a persistent query's driver
    assert sql.source().registry() == {**expected, "url": "https://127.0.0.1:8081"}
    spec = supervise.driver_spec(StreamQuery(name="q", sql="SELECT 1", output_topic="out",
                                             checkpoint="/tmp/q"))
    driven = views.Source(spec["bootstrap"], spec["registry_url"], spec["kafka_config"],
                          spec["registry_config"])
    assert driven.registry() == {**expected, "url": "https://127.0.0.1:8081"}
    assert as_registry(driven.registry()) == Registry(
        "https://127.0.0.1:8081", "millrace:s3cret", "/data/secure/ca.crt")


def test_an_explicit_registry_login_wins_and_an_open_registry_gets_none(settings: Any
                                                                        ) -> None:
    settings.SCHEMA_REGISTRY_URL = "http://127.0.0.1:8081"
    settings.KAFKA_CLIENT_CONFIG = SERVICE_LOGIN
    settings.MILLRACE_HTTP_TLS_CA = ""
    settings.SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO = "streams:other"
    assert supervise.registry_config() == {"basic.auth.user.info": "streams:other"}
    settings.SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO = ""
    settings.KAFKA_CLIENT_CONFIG = {}
    assert supervise.registry_config() == {}
    assert sql.source().registry() == {"url": "http://127.0.0.1:8081"}
    settings.SCHEMA_REGISTRY_URL = ""
    assert sql.source().registry() == {}  # no registry: views stay undecoded


@pytest.mark.parametrize(("config", "error"), [
    ({"url": "http://r", "basic.auth.user.info": "no-colon"}, "user:password"),
    ({"url": "http://r", "schema.registry.url": "http://r"}, "unknown schema registry"),
    ({"basic.auth.user.info": "a:b"}, "needs url"),
    ({"url": "http://r", "basic.auth.credentials.source": "SASL_INHERIT"}, "USER_INFO or URL"),
])
def test_a_bad_registry_client_config_is_refused_by_key(config: dict[str, str],
                                                        error: str) -> None:
    with pytest.raises(SchemaError, match=error):
        as_registry(config)


def test_credentials_source_url_leaves_the_login_in_the_url() -> None:
    found = as_registry({"url": "https://u:p@r:8081", "basic.auth.credentials.source": "URL",
                         "basic.auth.user.info": "ignored:here"})
    assert found.auth() is None and found.url == "https://u:p@r:8081"
    assert "ignored" not in repr(found)
