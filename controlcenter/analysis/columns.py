"""How a result table's columns read on a run's page: a label, and a format with its unit.

The jobs (laganalysis/jobs/) name their columns for programs (`lag_seconds_p95`,
`budget_left_fraction`) and return full-precision floats; the JSON and CSV downloads keep
both as they are. People get "Time lag p95" and "4 min 12 s". A column's format comes from
its name: the jobs name units the same way everywhere (`_seconds`, `_minutes`, `_fraction`,
`_rate`, `bytes`), and the few names that say nothing of their unit are listed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controlcenter.templatetags.millrace import duration
from controlcenter.templatetags.millrace_cluster import rate, size

Format = Callable[[Any], str]

# Burrow's statuses as the lag summary's `seconds_<STATUS>` columns name them.
_STATUS_WORDS = {"OK": "OK", "WARN": "warning", "ERR": "error", "STOP": "stopped",
                 "STALL": "stalled", "REWIND": "rewound"}


def _count(value: Any) -> str:
    return f"{value:,.0f}" if abs(value) >= 1 or value == 0 else _number(value)


def _number(value: Any) -> str:
    """Three significant digits below 100, whole numbers with separators above."""
    magnitude = abs(value)
    if magnitude >= 100 or value == int(value):
        return f"{value:,.0f}"
    digits = 2 - math.floor(math.log10(magnitude)) if magnitude else 0
    return f"{value:.{max(digits, 0)}f}"


def _seconds(value: Any) -> str:
    if abs(value) < 10:
        return f"{value:.2f} s".replace(".00 s", " s")
    if value >= 86_400:
        days, rest = divmod(value, 86_400)
        return f"{days:.0f} d {rest // 3600:.0f} h"
    return duration(float(value)).replace(".0 s", " s")


def _minutes(value: Any) -> str:
    return f"{_number(value)} min"


def _percent(value: Any) -> str:
    return f"{value * 100:.1f} %".replace(".0 %", " %")


def _rate(value: Any) -> str:
    return f"{rate(float(value))}/s"


def _bytes(value: Any) -> str:
    return size(int(value))


def _epoch(value: Any) -> str:
    return f"{dt.datetime.fromtimestamp(float(value), dt.UTC):%Y-%m-%d %H:%M:%S}"


def _flag(value: Any) -> str:
    return "yes" if value else "no"


_WEEKDAYS = ("", "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")


def _weekday(value: Any) -> str:  # Spark's dayofweek: 1 = Sunday
    return _WEEKDAYS[int(value)] if 1 <= value <= 7 else str(value)


def _plain(value: Any) -> str:
    return str(value)


# Columns whose name says nothing of their unit, or reads badly as words.
_NAMED: dict[str, tuple[str, Format]] = {
    "group": ("Group", _plain),
    "topic": ("Topic", _plain),
    "partition": ("Partition", _plain),
    "key": ("Key", _plain),
    "samples": ("Samples", _count),
    "lag": ("Lag", _count),
    "total_lag": ("Total lag", _count),
    "messages": ("Messages", _count),
    "bytes": ("Bytes", _bytes),
    "jumps": ("Jumps", _count),
    "jump": ("Lag jump", _count),
    "partitions": ("Partitions", _count),
    "distinct_keys": ("Distinct keys", _count),
    "share": ("Share", _percent),
    "top_key_share": ("Top key's share", _percent),
    "progress": ("Progress", _percent),
    "hot": ("Hot", _flag),
    "threshold_s": ("SLA threshold", _seconds),
    "eta_seconds": ("ETA", _seconds),
    "hour": ("Hour", _epoch),
    "ts": ("Time", _epoch),
    "event_ts": ("Event time", _epoch),
    "event_kind": ("Event", _plain),
    "event_broker": ("Event broker", _plain),
    "day_of_week": ("Day of week", _weekday),
    "hour_of_day": ("Hour of day", _plain),
    "baseline": ("Baseline lag", _count),
    "stddev": ("Std. deviation", _count),
    "z": ("z-score", _number),
    "slowest_topic": ("Slowest topic", _plain),
    "slowest_partition": ("Slowest partition", _plain),
    "skew_max_over_mean": ("Skew (max / mean)", _number),
    "skew_gini": ("Skew (Gini)", _number),
    "partition_max_over_mean": ("Partition skew (max / mean)", _number),
    "partition_gini": ("Partition skew (Gini)", _number),
    "observed_minutes": ("Observed", _minutes),
    "window_minutes": ("Window", _minutes),
    "breach_minutes": ("In breach", _minutes),
    "budget_minutes": ("Error budget", _minutes),
    "budget_left_minutes": ("Budget left", _minutes),
    "budget_left_fraction": ("Budget left (share)", _percent),
}

# Then the naming conventions, first match wins: (prefix, suffix) -> label template, format.
_PATTERNS: tuple[tuple[str, str, str, Format], ...] = (
    ("lag_seconds_", "", "Time lag {}", _seconds),
    ("lag_", "", "Lag {}", _count),
    ("seconds_", "", "Time {}", _minutes),  # converted from seconds below
    ("", "_seconds", "{}", _seconds),
    ("", "_minutes", "{}", _minutes),
    ("", "_fraction", "{} (share)", _percent),
    ("", "_rate", "{} rate", _rate),
    ("", "bytes", "{}", _bytes),
)


# Columns naming something the control center has a page for: the page's URL name.
_LINKS = {"group": "group", "topic": "topic", "slowest_topic": "topic"}


@dataclass(frozen=True)
class Column:
    name: str
    label: str
    format: Format
    numeric: bool

    @property
    def link(self) -> str | None:
        return _LINKS.get(self.name)

    def show(self, value: Any) -> str:
        if value is None:
            return "—"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return self.format(value) if self.format is _flag else str(value)
        return self.format(value)


def column(name: str) -> Column:
    """The label and format of a result column, from its name."""
    if name in _NAMED:
        label, fmt = _NAMED[name]
        return Column(name, label, fmt, fmt not in (_plain, _flag))
    for prefix, suffix, template, fmt in _PATTERNS:
        if name.startswith(prefix) and name.endswith(suffix) and name != prefix + suffix:
            stem = name[len(prefix):len(name) - len(suffix)] if suffix else name[len(prefix):]
            if prefix == "seconds_":  # Burrow status durations: minutes read better
                word = _STATUS_WORDS.get(stem, stem.lower())
                return Column(name, template.format(word), _status_minutes, True)
            label = template.format(_words(stem))
            return Column(name, label[0].upper() + label[1:], fmt, True)
    return Column(name, _words(name).capitalize(), _number, True)


def _status_minutes(value: Any) -> str:
    return _minutes(value / 60)


def _words(stem: str) -> str:
    return stem.replace("_", " ").strip()
