"""Who may see and change what, through Django's test client: the login setting applies
to pages only, every state change needs POST, a session and a permission."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import AsyncClient, Client

from controlcenter.models import AuditEntry
from tests.controlcenter.conftest import PASSWORD, make_user

SettingsWrapper = Any  # pytest-django's `settings` fixture

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def probe_urls(settings: SettingsWrapper) -> None:
    settings.ROOT_URLCONF = "tests.controlcenter.probe"


def signed_in(user: User) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_pages_are_public_by_default(client: Client) -> None:
    assert client.get("/audit/").status_code == 200
    assert client.get("/probe/").status_code == 200


def test_with_login_required_pages_send_anonymous_users_to_sign_in(
    client: Client, settings: SettingsWrapper
) -> None:
    settings.MILLRACE_UI_LOGIN_REQUIRED = True
    response = client.get("/audit/?q=topic")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/audit/%3Fq%3Dtopic"
    assert client.get("/login/").status_code == 200


def test_with_login_required_apis_and_the_health_probe_stay_open(
    client: Client, settings: SettingsWrapper
) -> None:
    settings.MILLRACE_UI_LOGIN_REQUIRED = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/schema-registry/subjects").status_code == 200
    assert client.get("/api/schema/").status_code == 200


def test_with_login_required_a_signed_in_user_sees_pages(
    viewer: User, settings: SettingsWrapper
) -> None:
    settings.MILLRACE_UI_LOGIN_REQUIRED = True
    assert signed_in(viewer).get("/audit/").status_code == 200


def test_an_action_refuses_get(operator: User) -> None:
    response = signed_in(operator).get("/probe/touch/")
    assert response.status_code == 405
    assert not AuditEntry.objects.exists()


def test_an_anonymous_post_goes_to_sign_in_and_back_to_the_page_it_came_from(
    client: Client,
) -> None:
    response = client.post("/probe/touch/", {"target": "t"}, HTTP_REFERER="http://testserver/probe/?x=1")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/probe/%3Fx%3D1"
    assert not AuditEntry.objects.exists()


def test_a_foreign_referer_is_not_a_place_to_return_to(client: Client) -> None:
    response = client.post("/probe/touch/", HTTP_REFERER="https://evil.example/phish")
    assert response["Location"] == "/login/?next=/"


def test_a_user_without_the_permission_gets_403_and_nothing_is_recorded(viewer: User) -> None:
    response = signed_in(viewer).post("/probe/touch/", {"target": "t"})
    assert response.status_code == 403
    assert "Create and delete topics" in response.content.decode()
    assert not AuditEntry.objects.exists()


def test_a_permitted_change_is_recorded_with_who_what_and_result(operator: User) -> None:
    response = signed_in(operator).post("/probe/touch/", {"target": "topic orders"})
    assert response.status_code == 302
    entry = AuditEntry.objects.get()
    assert (entry.user, entry.username, entry.action, entry.target) == (
        operator, "operator", "probe.touch", "topic orders")
    assert (entry.result, entry.message, entry.parameters) == ("ok", "touched", {"fail": False})
    assert entry.remote_addr == "127.0.0.1"


def test_a_failed_change_is_recorded_as_an_error_in_the_systems_words(operator: User) -> None:
    signed_in(operator).post("/probe/touch/", {"target": "topic orders", "fail": "1"})
    entry = AuditEntry.objects.get()
    assert entry.result == "error"
    assert entry.message == "INVALID_CONFIG: the broker refused"


def test_superusers_hold_every_capability() -> None:
    admin = make_user("root", superuser=True)
    assert signed_in(admin).post("/probe/touch/", {"target": "x"}).status_code == 302
    assert AuditEntry.objects.get().username == "root"


# Committed data: the async views run in a thread with a connection of their own.
@pytest.mark.django_db(transaction=True)
async def test_async_actions_are_guarded_and_audited_the_same_way(
    operator: User, viewer: User
) -> None:
    anonymous = AsyncClient()
    assert (await anonymous.post("/probe/touch-async/")).status_code == 302
    assert (await anonymous.get("/probe/touch-async/")).status_code == 405
    refused = AsyncClient()
    await refused.aforce_login(viewer)
    assert (await refused.post("/probe/touch-async/")).status_code == 403
    allowed = AsyncClient()
    await allowed.aforce_login(operator)
    assert (await allowed.post("/probe/touch-async/")).status_code == 200
    entry = await AuditEntry.objects.aget()
    assert (entry.username, entry.action, entry.result) == ("operator", "probe.touch_async", "ok")


def test_every_form_needs_its_csrf_token(operator: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post("/probe/touch/", {"target": "x"})
    assert response.status_code == 403
    assert "Nothing was changed" in response.content.decode()
    assert not AuditEntry.objects.exists()


def test_signing_out_needs_a_post(viewer: User) -> None:
    client = signed_in(viewer)
    assert client.get("/logout/").status_code == 405
    assert client.post("/logout/", {"next": "/audit/"})["Location"] == "/audit/"
    assert "_auth_user_id" not in client.session
