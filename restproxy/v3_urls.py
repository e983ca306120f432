"""v3 routes (filled in by views_v3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def v3_patterns(route: Callable[..., Any]) -> list[Any]:
    return []
