"""A PostgreSQL database of the run's own beside the default one, so the read model's store
is tested on both (SQLite by default, PostgreSQL with DATABASE_URL)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import dj_database_url
import psycopg
import pytest
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections

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
