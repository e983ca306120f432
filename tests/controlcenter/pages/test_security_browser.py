"""The Security pages in real Chromium against a secured broker (SASL_SSL, StandardAuthorizer;
the control center logs in as a super user): a staff user creates a SCRAM user on the page,
that user's confluent-kafka producer is refused (TOPIC_AUTHORIZATION_FAILED), the staff user
previews and creates a WRITE ACL on the page, and the same client's next produce succeeds
within seconds; deleting the ACL on the page refuses it again.
Screenshots: var/screenshots/<test name>/."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException
from django.contrib.auth.models import User
from django.test import override_settings
from playwright.sync_api import expect

from clusterclient import ClusterClient
from tests.controlcenter.browser import Browser, LiveServer, serve
from tests.controlcenter.conftest import PASSWORD
from tests.securebroker import SCRAM_USERS, SecuredBroker, start_secured_broker

pytestmark = pytest.mark.slow
SUPER_USER, SUPER_PASSWORD = SCRAM_USERS["SCRAM-SHA-512"]
TOPIC = "payments"


def asgi_application() -> Any:
    from millrace.asgi import application

    return application


def login_config(broker: SecuredBroker, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password, "ssl.ca.location": broker.ca_file}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    broker = start_secured_broker(tmp_path_factory.mktemp("security-browser"), {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{SUPER_USER}",
    })
    config = login_config(broker, SUPER_USER, SUPER_PASSWORD)
    ClusterClient(config.pop("bootstrap.servers"), config).create_topic(TOPIC, 1, 1)
    yield broker
    broker.process.stop()


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any,
           secured: SecuredBroker) -> Iterator[LiveServer]:  # fmt: skip
    config = login_config(secured, SUPER_USER, SUPER_PASSWORD)
    bootstrap = config.pop("bootstrap.servers")
    with django_db_blocker.unblock(), override_settings(
            KAFKA_BOOTSTRAP_SERVERS=bootstrap, KAFKA_CLIENT_CONFIG=config), \
            serve(asgi_application) as live:
        yield live


@pytest.fixture(scope="module")
def chromium_instance(server: LiveServer) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        from tests.controlcenter.browser import launch

        instance = launch(playwright)
        yield instance
        instance.close()


@pytest.fixture
def tab(chromium_instance: Any, server: LiveServer, request: pytest.FixtureRequest,
        transactional_db: None) -> Iterator[Browser]:  # fmt: skip
    User.objects.create_user("security-officer", password=PASSWORD, is_staff=True)
    browser = Browser(chromium_instance, server, request.node.name)
    browser.login("security-officer", PASSWORD, then="/security/users/")
    yield browser
    browser.close()
    assert not browser.errors, f"JavaScript errors on the page: {browser.errors}"


def produce_once(producer: confluent_kafka.Producer) -> KafkaError | None:
    """The delivery report's error; librdkafka refuses at once while its metadata still
    says the topic is not authorized (refreshed every second here, every 5 min by
    default)."""
    reports: list[KafkaError | None] = []
    try:
        producer.produce(TOPIC, b"paid", on_delivery=lambda err, _msg: reports.append(err))
    except KafkaException as exc:
        return exc.args[0]
    producer.flush(20)
    assert len(reports) == 1
    return reports[0]


def wait_for_outcome(producer: confluent_kafka.Producer, allowed: bool) -> float:
    """Produce until the broker's answer is the expected one; how long that took."""
    started = time.monotonic()
    while True:
        error = produce_once(producer)
        if (error is None) == allowed:
            return time.monotonic() - started
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert time.monotonic() - started < 30, "the ACL change never took effect"
        time.sleep(0.2)


def test_an_acl_created_on_the_page_lets_a_real_client_produce(
        tab: Browser, secured: SecuredBroker) -> None:
    tab.page.fill("#scram-form input[name=username]", "carol")
    tab.page.select_option("#scram-form select[name=mechanism]", "SCRAM-SHA-512")
    tab.page.fill("#scram-form input[name=password]", "carol-secret")
    with tab.page.expect_navigation():
        tab.page.click("#scram-form button[type=submit]")
    expect(tab.page.locator("#scram-users tr[data-user=carol]")).to_have_count(1)
    tab.snap("carol created")

    producer = confluent_kafka.Producer({**login_config(secured, "carol", "carol-secret"),
                                         "message.timeout.ms": 10000,
                                         "topic.metadata.refresh.interval.ms": 1000})
    refusal = produce_once(producer)
    assert refusal is not None and refusal.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    tab.visit("/security/acls/+create/")
    tab.page.fill("input[name=principal]", "User:carol")
    tab.page.select_option("select[name=operation]", "WRITE")
    tab.page.fill("input[name=resource_name]", TOPIC)
    with tab.page.expect_navigation():
        tab.page.click("#acl-preview-button")
    expect(tab.page.locator("#acl-preview-sentence")).to_have_text(
        f"User:carol may WRITE on the topic “{TOPIC}”, from any host.")
    tab.snap("preview")
    with tab.page.expect_navigation():
        tab.page.click("#acl-create-form button[type=submit]")
    expect(tab.page.locator("#acl-table tr[data-principal='User:carol']")).to_have_count(1)
    tab.snap("acl created")
    wait_for_outcome(producer, allowed=True)

    with tab.page.expect_navigation():
        tab.page.click("#acl-table tr[data-principal='User:carol'] form.acl-delete button")
    expect(tab.page.locator("#acl-table tr[data-principal='User:carol']")).to_have_count(0)
    wait_for_outcome(producer, allowed=False)
    producer.flush(5)
    tab.visit("/audit/")
    expect(tab.page.locator("#audit-entries")).to_contain_text("acl.create")
