"""Fixtures for the control center: accounts with and without permissions, and the
browser harness (tests/controlcenter/browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from controlcenter.access import Capability
from tests.controlcenter import probe
from tests.controlcenter.browser import Browser, LiveServer, launch, serve

PASSWORD = "correct horse battery staple"


def make_user(username: str, *capabilities: Capability, superuser: bool = False) -> User:
    if superuser:
        return User.objects.create_superuser(username, password=PASSWORD)
    user = User.objects.create_user(username, password=PASSWORD)
    for capability in capabilities:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="controlcenter",
                                   codename=capability.codename)
        )  # fmt: skip
    return user


@pytest.fixture
def viewer(django_user_model: Any) -> User:
    """Signed in, no permissions."""
    return make_user("viewer")


@pytest.fixture
def operator(django_user_model: Any) -> User:
    """May change topics, nothing else."""
    return make_user("operator", Capability.CHANGE_TOPICS)


@pytest.fixture(scope="session")
def probe_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveServer]:
    """The project plus tests/controlcenter/probe.py, served by Daphne over the test
    database (forked while database access is allowed, so the server may use it)."""
    with django_db_blocker.unblock(), serve(
        probe.application, ROOT_URLCONF="tests.controlcenter.probe"
    ) as s:
        yield s


@pytest.fixture(scope="module")
def chromium(probe_server: LiveServer) -> Iterator[Any]:
    """Chromium for one test module. Playwright's sync API runs an event loop on this
    thread, which Django takes for an async context and refuses the ORM in; while it runs,
    the tests' own ORM calls (plain sync code) are allowed, as Playwright documents."""
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        instance = launch(playwright)
        yield instance
        instance.close()


@pytest.fixture
def browser(
    chromium: Any, probe_server: LiveServer, request: pytest.FixtureRequest,
    transactional_db: None,
) -> Iterator[Browser]:  # fmt: skip
    """A fresh browser (no cookies) on the probe server; data the test writes is committed,
    so the server sees it."""
    tab = Browser(chromium, probe_server, request.node.name)
    yield tab
    tab.close()
    assert not tab.errors, f"JavaScript errors on the page: {tab.errors}"
