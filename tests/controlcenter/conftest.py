"""Fixtures for the control center: accounts with and without permissions, the browser
harness (tests/controlcenter/browser.py), and a PostgreSQL database of the run's own beside
the default one, so the read model's store is tested on both."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import dj_database_url
import psycopg
import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections

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
    database, in a process of its own."""
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


POSTGRES = "postgres"  # the Django alias
# A server and a database to connect to while creating and dropping the run's own database
# (PostgreSQL runs locally and in CI).
POSTGRES_URL = os.environ.get("MILLRACE_TEST_POSTGRES_URL",
                              "postgres://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def postgres_alias(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """The alias of a migrated PostgreSQL database, named per run so that parallel runs on
    one server never share it; dropped at the end."""
    name = f"test_millrace_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
        server.execute(f'CREATE DATABASE "{name}"')
    config = dj_database_url.parse(POSTGRES_URL)
    config["NAME"] = name
    # connections.settings is settings.DATABASES: the alias is known to every test after this.
    filled = connections.configure_settings(
        {DEFAULT_DB_ALIAS: dict(connections.settings[DEFAULT_DB_ALIAS]), POSTGRES: config})
    connections.settings[POSTGRES] = filled[POSTGRES]
    try:
        with django_db_blocker.unblock():
            call_command("migrate", database=POSTGRES, verbosity=0)
        yield POSTGRES
    finally:
        connections[POSTGRES].close()
        del connections.settings[POSTGRES]
        with psycopg.connect(POSTGRES_URL, autocommit=True) as server:
            server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
