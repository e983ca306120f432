"""Template helpers of the consumer-group and schema pages: sortable column headers, lag in
seconds, signed offsets. Use with `{% load millrace_groups %}`."""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.http import urlencode

register = template.Library()


@register.simple_tag
def sort_link(key: str, label: str, sort: str, query: str = "") -> str:
    """A column header that sorts by `key`, descending first, ascending when clicked again;
    it carries the search and marks the current order for screen readers."""
    descending = f"-{key}"
    target = key if sort == descending else descending
    state = {descending: "descending", key: "ascending"}.get(sort)
    params = urlencode({"q": query, "sort": target} if query else {"sort": target})
    if state:
        return format_html('<a class="sort" href="?{}" aria-sort="{}">{}</a>', params, state,
                           label)
    return format_html('<a class="sort" href="?{}">{}</a>', params, label)


@register.filter
def seconds(value: float | None) -> str:
    """Lag in seconds: "—" when unknown (too little history, or a row without the field,
    which a template hands over as ""), 1 decimal under a minute, then whole seconds with
    minutes/hours spelled out."""
    if not isinstance(value, (int, float)):
        return "—"
    if value < 60:
        return f"{value:.1f}"
    whole = round(value)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    spelled = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
    return f"{whole} ({spelled})"


@register.filter
def signed(value: int | None) -> str:
    """+5 forward (skipped), -5 back (re-read), 0; "—" when unknown."""
    if value is None:
        return "—"
    return f"{value:+d}" if value else "0"


# What confluent-kafka 2.16 cannot say (clusterclient/README.md, "Not here"): it reports a
# consumer group's Assigning and Reconciling states as UNKNOWN.
UNNAMED_STATE = ("The broker answered a state confluent-kafka cannot name: for a consumer "
                 "group, Assigning or Reconciling (a rebalance in progress).")


@register.simple_tag
def group_state(state: str, group_type: str) -> str:
    """A group's state as Kafka names it; an UNKNOWN consumer group's says why."""
    if state == "UNKNOWN" and group_type == "consumer":
        return format_html('<span class="state-unnamed" title="{}">{}</span>', UNNAMED_STATE,
                           state)
    return format_html("{}", state)
