"""The first account: created once with a random password printed once, or with the
configured one; later starts leave it alone."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("ensure_admin", *args, stdout=out)
    return out.getvalue()


def test_first_start_creates_a_superuser_with_a_random_password_shown_once() -> None:
    answer = json.loads(run("--json"))
    assert answer["created"] is True and answer["source"] == "random"
    assert len(answer["password"]) >= 16
    user = authenticate(username="admin", password=answer["password"])
    assert user is not None and user.is_superuser
    again = json.loads(run("--json"))
    assert again == {"username": "admin", "created": False}
    assert "exists; nothing to do" in run()


def test_the_configured_password_is_used_and_not_echoed(settings: Any) -> None:
    settings.MILLRACE_ADMIN_PASSWORD = "s3cret-from-env"
    text = run()
    assert "s3cret-from-env" not in text
    assert "MILLRACE_ADMIN_PASSWORD" in text
    assert authenticate(username="admin", password="s3cret-from-env") is not None


def test_an_existing_admin_keeps_its_password(settings: Any) -> None:
    User.objects.create_user("admin", password="chosen-later")
    settings.MILLRACE_ADMIN_PASSWORD = "something else"
    assert json.loads(run("--json"))["created"] is False
    assert authenticate(username="admin", password="chosen-later") is not None
