"""What every job returns: small tables with declared columns and chart series as data."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class ParamError(ValueError):
    """A job parameter that cannot be run; the message names it."""


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]

    def __post_init__(self) -> None:
        for row in self.rows:
            if tuple(row) != self.columns:
                raise ValueError(f"row columns {tuple(row)} are not {self.columns}")

    @classmethod
    def of(cls, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Table:
        return cls(tuple(columns), [{c: _plain(r.get(c)) for c in columns} for r in rows])


@dataclass(frozen=True)
class Series:
    """One chart: shared x values (epoch seconds or labels) and named y series."""

    x: list[Any]
    y: dict[str, list[float | None]]


@dataclass
class JobResult:
    job: str
    tables: dict[str, Table] = field(default_factory=dict)
    charts: dict[str, Series] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "tables": {
                name: {"columns": list(t.columns), "rows": t.rows}
                for name, t in self.tables.items()
            },
            "charts": {name: {"x": s.x, "y": s.y} for name, s in self.charts.items()},
        }


def _plain(value: Any) -> Any:
    """JSON-safe: no NaN or infinity (None instead), Decimals and numpy scalars as floats."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return number if math.isfinite(number) else None
