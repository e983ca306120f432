"""The live protocol's Python side (controlcenter/live.py), and the page components."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.test import RequestFactory

from controlcenter import live
from controlcenter.navigation import nav_links


def test_topics_are_split_on_raw_commas_then_decoded() -> None:
    query = b"topics=overview,group:a%2Cb,topic:orders%20eu&other=1&topics=overview"
    assert live.parse_topics(query) == ["overview", "group:a,b", "topic:orders eu"]
    assert live.parse_topics(b"") == []
    assert live.parse_topics("topics=") == []


def test_too_many_or_too_long_topics_are_refused() -> None:
    many = ",".join(f"t{n}" for n in range(live.MAX_TOPICS + 1))
    with pytest.raises(live.BadTopics, match="at most"):
        live.parse_topics(f"topics={many}")
    with pytest.raises(live.BadTopics, match="longer than"):
        live.parse_topics("topics=" + "x" * (live.MAX_TOPIC_LENGTH + 1))


def test_messages_have_the_documented_shape() -> None:
    assert live.fragment("brokers", '<table id="brokers"></table>') == {
        "type": "fragment", "id": "brokers", "html": '<table id="brokers"></table>'}
    assert live.fragment("tail", "<tr></tr>", swap="afterbegin")["swap"] == "afterbegin"
    assert live.banner("cluster", "Cluster unreachable") == {
        "type": "banner", "key": "cluster", "level": "error",
        "text": "Cluster unreachable", "active": True}
    assert live.banner("cluster", active=False)["active"] is False
    assert live.data("group:g", "lag", [[1, 2]]) == {
        "type": "data", "topic": "group:g", "name": "lag", "data": [[1, 2]]}


def render(text: str, **context: object) -> str:
    return Template("{% load millrace %}" + text).render(Context(context))


def test_status_badges_name_every_burrow_status() -> None:
    for status, kind in [("OK", "ok"), ("warn", "warn"), ("ERR", "err"), ("STOP", "stop"),
                         ("STALL", "stall"), ("REWIND", "rewind")]:  # fmt: skip
        html = render("{% status_badge s %}", s=status)
        assert f'class="badge badge-{kind}"' in html and status.upper() in html
    # Burrow's NOTFOUND (a group with no commit sampled, like Connect's workers, which never
    # commit) reads as what it is, with Burrow's name in its title.
    notfound = render("{% status_badge s %}", s="NOTFOUND")
    assert ">NO COMMITS<" in notfound and "NOTFOUND" in notfound
    assert "badge-neutral" in render("{% status_badge s %}", s="<b>odd</b>")
    assert "<b>" not in render("{% status_badge s %}", s="<b>odd</b>")


def test_progress_is_clamped_and_labelled() -> None:
    assert "width: 100.0%" in render('{% progress 150 100 "catch-up" %}')
    assert "width: 0.0%" in render("{% progress 5 0 %}")
    assert "catch-up · 25.0%" in render('{% progress 1 4 "catch-up" %}')


@pytest.mark.urls("tests.controlcenter.probe")
def test_the_nav_shows_pages_that_exist_and_marks_the_current_one() -> None:
    links = {link.label: link for link in nav_links("/audit/")}
    assert {"Overview", "Audit log", "API docs"} <= set(links)
    assert links["Audit log"].active and not links["Overview"].active
    assert [link.label for link in nav_links("/") if link.active] == ["Overview"]
    request = RequestFactory().get("/audit/")
    assert 'aria-current="page">Audit log' in render("{% main_nav %}", request=request)
