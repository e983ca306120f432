"""Template components shared by every page: navigation, status badges, progress bars,
pagination, links to what a name names. Use with `{% load millrace %}`."""

from __future__ import annotations

from typing import Any

from django import template
from django.core.paginator import Page
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from controlcenter import clusters
from controlcenter.navigation import nav_links

register = template.Library()

# Burrow's statuses (dashboards_lag.md §3) and their badge colours (css: .badge-*).
BURROW_STATUSES = {"OK": "ok", "WARN": "warn", "ERR": "err", "STOP": "stop",
                   "STALL": "stall", "REWIND": "rewind"}  # fmt: skip
BURROW_MEANINGS = {
    "OK": "consuming and keeping up",
    "WARN": "lag is growing while the group commits",
    "ERR": "the group stopped committing while lag exists",
    "STOP": "commits stopped long ago",
    "STALL": "committing the same offset while lag exists",
    "REWIND": "the committed offset went backwards",
    # Burrow knows a group by its commits; a new group commits after it has consumed.
    "NOTFOUND": "Burrow's NOTFOUND: no committed offset sampled (a group that has not "
                "committed yet, or one that never commits, such as Connect's workers)",
}
# What a badge reads where Burrow's own name reads like an error to a newcomer.
BURROW_LABELS = {"NOTFOUND": "NO COMMITS"}


@register.inclusion_tag("controlcenter/components/nav.html", takes_context=True)
def main_nav(context: template.Context) -> dict[str, Any]:
    request = context.get("request")
    configured = clusters.configured()
    return {"links": nav_links(request.path if request is not None else "/"),
            # the switcher, once there is more than one cluster to switch between
            "clusters": configured if len(configured) > 1 else (),
            "current_cluster": clusters.current().name,
            "path": request.path if request is not None else "/"}


@register.simple_tag
def bootstrap_servers() -> str:
    """The cluster every page shows, as clients would be configured for it."""
    return clusters.current().bootstrap_servers


@register.simple_tag
def status_badge(status: str | None) -> str:
    """A Burrow status as a coloured badge; anything else as a neutral one."""
    name = (status or "").upper()
    kind = BURROW_STATUSES.get(name, "neutral")
    return format_html(
        '<span class="badge badge-{}" title="{}">{}</span>',
        kind, BURROW_MEANINGS.get(name, ""), BURROW_LABELS.get(name, name) or "—",
    )  # fmt: skip


@register.simple_tag
def result_badge(ok: bool | str) -> str:
    """ok / error: an action's outcome."""
    good = ok is True or ok == "ok"
    return format_html(
        '<span class="badge badge-{}">{}</span>', "ok" if good else "err", "ok" if good else "error"
    )


@register.inclusion_tag("controlcenter/components/progress.html")
def progress(value: float, maximum: float, label: str = "") -> dict[str, Any]:
    """A progress bar (catch-up, reassignment, ...): `value` of `maximum`."""
    share = 0.0 if maximum <= 0 else max(0.0, min(1.0, value / maximum))
    return {"percent": round(share * 100, 1), "value": value, "maximum": maximum,
            "label": label}  # fmt: skip


@register.filter
def duration(seconds: float | None) -> str:
    """12.3 s, 1 min 23.4 s, 2 h 5 min; "—" when there is none (not started)."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        return f"{minutes:.0f} min {rest:.1f} s"
    hours, rest = divmod(seconds, 3600)
    return f"{hours:.0f} h {rest // 60:.0f} min"


@register.inclusion_tag("controlcenter/components/pagination.html", takes_context=True)
def pagination(context: template.Context, page: Page[Any]) -> dict[str, Any]:
    """Links to the first, previous, nearby, next and last pages, keeping the other query
    parameters (search, sort) of the current request."""
    paginator = page.paginator
    nearby = paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)
    return {"page": page, "nearby": list(nearby), "ellipsis": paginator.ELLIPSIS,
            "request": context.get("request")}  # fmt: skip


# What the audit log's targets ("topic orders", "group billing", "broker 2") name, and the
# page each kind has.
_TARGET_PAGES = {"topic": "topic", "group": "group", "broker": "broker", "subject": "subject",
                 "run": "analysis-run"}


@register.filter
def target_link(target: str) -> str:
    """An audit target as a link to its page when it has one, else as text."""
    kind, _, name = (target or "").partition(" ")
    view = _TARGET_PAGES.get(kind)
    if view is None or not name:
        return format_html("{}", target)
    try:
        url = reverse(view, args=[name])
    except NoReverseMatch:  # a broker or run "id" that is not a number
        return format_html("{}", target)
    return format_html('{} <a href="{}">{}</a>', kind, url, name)


@register.simple_tag
def name_link(kind: str, name: object) -> str:
    """A topic's or group's name as a link to its page (kind "topic" or "group")."""
    if name in (None, ""):
        return "—"
    return format_html('<a href="{}">{}</a>', reverse(kind, args=[str(name)]), name)
