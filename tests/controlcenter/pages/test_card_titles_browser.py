"""A flush card's title keeps the card's padding on every page that uses the component,
the analytics pages included (they load millrace.css only); screenshots for a look."""

from __future__ import annotations

from typing import Any

import pytest

from controlcenter.models import AnalysisRun, AnalysisStatus
from tests.controlcenter.browser import Browser
from tests.controlcenter.pages.test_group_browser import cluster_server, tab

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["cluster_server", "tab"]  # the browser fixtures of the group pages' tests

TITLE_INSET = """() => [...document.querySelectorAll('.card.flush > .card-title')].map((t) => {
  const card = t.parentElement.getBoundingClientRect();
  const text = document.createRange();
  text.selectNodeContents(t);
  return { title: t.textContent.trim(), left: text.getBoundingClientRect().left - card.left,
           top: text.getBoundingClientRect().top - card.top };
})"""


def insets(tab: Browser) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = tab.page.evaluate(TITLE_INSET)
    assert found, "the page has no flush card with a title"
    return found


def test_flush_card_titles_sit_inside_the_card_on_the_analytics_pages(tab: Browser) -> None:
    result = {"job": "hot_partitions", "charts": {}, "tables": {"partitions": {
        "columns": ["topic", "partition", "messages"],
        "rows": [{"topic": "orders", "partition": p, "messages": 10 * p} for p in range(4)]}}}
    run = AnalysisRun.objects.create(job="hot_partitions", status=AnalysisStatus.SUCCEEDED,
                                     result=result)
    for path in ("/analytics/", f"/analytics/runs/{run.pk}/", "/"):
        tab.visit(path)
        for title in insets(tab):
            assert title["left"] >= 12 and title["top"] >= 8, (path, title)
