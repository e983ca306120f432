"""`python manage.py ensure_admin`: the control center's first account.

On first start there is no user, so nobody could change anything. This creates the
superuser `admin` with MILLRACE_ADMIN_PASSWORD or, when that is empty, a random password
that it prints once; later runs find the account and leave it alone (change the password
on /admin/ or with `manage.py changepassword admin`). `--json` is for the platform command,
which shows the password in its endpoint table; `--migrate` (the platform's too) runs
`migrate` first in the same process, one Django start instead of two.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

USERNAME = "admin"


def ensure_admin(password: str = "") -> dict[str, Any]:
    """Create `admin` if there is no such account. The answer says whether it was created,
    where its password came from and, only for a random one, the password."""
    user_model = get_user_model()
    with transaction.atomic():
        if user_model.objects.filter(username=USERNAME).exists():
            return {"username": USERNAME, "created": False}
        chosen = password or secrets.token_urlsafe(12)
        user_model.objects.create_superuser(USERNAME, email="", password=chosen)
    if password:  # the operator knows it; do not echo a configured secret
        return {"username": USERNAME, "created": True, "source": "MILLRACE_ADMIN_PASSWORD"}
    return {"username": USERNAME, "created": True, "source": "random", "password": chosen}


class Command(BaseCommand):
    help = "Create the `admin` superuser on first start; print its password once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="answer as one JSON object")
        parser.add_argument("--migrate", action="store_true",
                            help="bring the database up to date first (manage.py migrate)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        answer = ensure_admin(settings.MILLRACE_ADMIN_PASSWORD)
        if opts["json"]:
            self.stdout.write(json.dumps(answer))
        elif "password" in answer:
            self.stdout.write(
                f"Created the superuser {USERNAME!r} with password {answer['password']}"
                " (shown only this once)."
            )
        elif answer["created"]:
            self.stdout.write(
                f"Created the superuser {USERNAME!r} with the password in MILLRACE_ADMIN_PASSWORD."
            )
        else:
            self.stdout.write(f"The account {USERNAME!r} exists; nothing to do.")
