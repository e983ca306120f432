"""API tokens: what a script presents instead of a password to the JSON API (/api/v1/) and
the collector's lag metrics, as `Authorization: Token <key>` (DRF's TokenAuthentication;
`Bearer <key>` too, which Prometheus' `authorization` block sends).

One token per user (DRF's `authtoken` model), created or replaced on the API token page or
with `manage.py drf_create_token [-r] <user>`; creating one shows the key once. A token acts
as its user: the same permissions as that user's session.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.authtoken.models import Token

KEYWORDS = ("token", "bearer")


def key_of(header: str | None) -> str | None:
    """The key of a `Token <key>` or `Bearer <key>` header, else None (not a token)."""
    scheme, _, key = (header or "").strip().partition(" ")
    if scheme.lower() not in KEYWORDS or not key.strip() or " " in key.strip():
        return None
    return key.strip()


def user_for(key: str) -> User | None:
    """The active user a token belongs to, or None."""
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return None
    user: User = token.user
    return user


@transaction.atomic
def replace_token(user: User) -> str:
    """A new key for `user` (the old one stops working)."""
    Token.objects.filter(user=user).delete()
    return str(Token.objects.create(user=user).key)


def token_created(user: User) -> object | None:
    """When `user`'s token was made, or None when the user has none."""
    token = Token.objects.filter(user=user).first()
    return None if token is None else token.created
