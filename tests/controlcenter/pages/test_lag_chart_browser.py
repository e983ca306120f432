"""A group's lag chart in real Chromium: its time axis spans the chosen window, whether
the collector has recorded one point or many (uPlot on its own stretched one point's axis
over years)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlcenter.models import BurrowStatus, GroupLagHistory, GroupState
from tests.controlcenter.browser import Browser
from tests.controlcenter.pages.test_group_browser import cluster_server, tab

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["cluster_server", "tab"]  # the browser fixtures of the group pages' tests

# What the chart's x axis shows: its range and, for each tick, its time and its label.
X_AXIS = """() => {
  const chart = document.getElementById('lag-chart').uplot;
  const axis = chart.axes[0];
  return { min: chart.scales.x.min, max: chart.scales.x.max,
           ticks: axis._splits, labels: axis._values };
}"""


def seed_group(group_id: str, minutes_ago: list[float]) -> None:
    now = timezone.now()
    GroupState.objects.create(group_id=group_id, state="Stable", members=1, topics=1,
                              partitions=1, total_lag=5, max_lag=5, max_lag_seconds=2.0,
                              status=BurrowStatus.OK, updated_at=now)
    for minutes in minutes_ago:
        GroupLagHistory.objects.create(group_id=group_id,
                                       ts=now - dt.timedelta(minutes=minutes), total_lag=5,
                                       max_lag=5, max_lag_seconds=2.0, status=BurrowStatus.OK)


def x_axis(tab: Browser, path: str) -> dict[str, Any]:
    tab.visit(path)
    expect(tab.page.locator("#lag-chart .u-over")).to_be_visible()
    axis: dict[str, Any] = tab.page.evaluate(X_AXIS)
    return axis


@pytest.mark.parametrize("minutes_ago", [[3.0], [3.0, 2.0]], ids=["one-point", "two-points"])
@pytest.mark.parametrize(("window", "length"), [("15m", 900), ("7d", 7 * 86400)])
def test_the_time_axis_spans_the_chosen_window(tab: Browser, minutes_ago: list[float],
                                               window: str, length: int) -> None:
    seed_group("fresh", minutes_ago)
    before = timezone.now().timestamp()
    axis = x_axis(tab, f"/groups/fresh/?window={window}")
    after = timezone.now().timestamp()
    assert before - 5 <= axis["max"] <= after + 5
    assert axis["max"] - axis["min"] == pytest.approx(length, abs=1)
    assert len(axis["ticks"]) >= 2
    assert all(axis["min"] <= tick <= axis["max"] for tick in axis["ticks"]), axis
    # Times of day (or days for a week), never a year: the labels name moments in the window.
    years = {str(year) for year in range(2000, 2100)}
    assert not any(label in years for label in axis["labels"]), axis["labels"]
