"""The control center's main navigation, in the order the sidebar shows it.

An entry appears once its URL name resolves, so a page shows up in the navigation in
the commit that adds its route; nothing links to a page that does not exist yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse


@dataclass(frozen=True)
class NavEntry:
    label: str
    url_name: str


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    active: bool


NAV: tuple[NavEntry, ...] = (
    NavEntry("Overview", "overview"),
    NavEntry("Brokers", "brokers"),
    NavEntry("Topics", "topics"),
    NavEntry("Consumer groups", "groups"),
    NavEntry("Schemas", "schemas"),
    NavEntry("Kafka Connect", "connect"),
    NavEntry("Analytics", "analytics"),
    NavEntry("Streams", "streams"),
    NavEntry("Replication", "replication"),
    NavEntry("ACLs", "acls"),
    NavEntry("SCRAM users", "scram-users"),
    NavEntry("Audit log", "audit-log"),
    NavEntry("API token", "api-token"),
    NavEntry("API docs", "swagger"),
)


def nav_links(path: str) -> list[NavLink]:
    """The entries whose page exists, the one `path` is under marked active (the root
    page only on itself, every other page on its whole subtree)."""
    links = []
    for entry in NAV:
        try:
            url = reverse(entry.url_name)
        except NoReverseMatch:
            continue
        active = path == url if url == "/" else path.startswith(url)
        links.append(NavLink(entry.label, url, active))
    return links
