"""Template filters of the cluster pages: rates, byte sizes, broker status badges, and the
leadership map's cells. Use with `{% load millrace_cluster %}`."""

from __future__ import annotations

from django import template
from django.utils.html import format_html

register = template.Library()

BROKER_BADGES = {"up": "ok", "fenced": "warn", "down": "err"}


@register.filter
def rate(value: float | None) -> str:
    """A per-second rate: 1234.5 -> "1.2k"; None (not measured yet) -> "—"."""
    if value is None:
        return "—"
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.1f}" if value % 1 else f"{value:.0f}"


@register.filter
def size(value: int | None) -> str:
    if value is None:
        return "—"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TiB"


@register.simple_tag
def broker_badge(status: str) -> str:
    return format_html('<span class="badge badge-{}">{}</span>',
                       BROKER_BADGES.get(status, "neutral"), status)


@register.simple_tag
def replica_cell(partition: object, node_id: int) -> str:
    """One cell of the leadership map: L leader, F in-sync follower, ✗ out of sync."""
    replicas = getattr(partition, "replicas", []) or []
    isr = getattr(partition, "isr", []) or []
    if node_id not in replicas:
        return format_html('<td class="map-none"></td>')
    preferred = " preferred" if replicas and replicas[0] == node_id else ""
    if getattr(partition, "leader", None) == node_id:
        return format_html('<td class="map-leader{}" title="leader{}">L</td>', preferred,
                           preferred and " (preferred)")
    if node_id in isr:
        return format_html('<td class="map-follower{}" title="in-sync follower">F</td>',
                           preferred)
    return format_html('<td class="map-out{}" title="replica out of sync">✗</td>', preferred)


@register.simple_tag
def partition_messages(partition: object) -> str:
    """End offset minus log start offset, or "—" before both are known."""
    start = getattr(partition, "log_start_offset", None)
    end = getattr(partition, "log_end_offset", None)
    return "—" if start is None or end is None else str(end - start)
