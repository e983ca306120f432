"""A run's result for people and programs: tables to show, JSON and CSV downloads.

The result is `laganalysis.jobs.result.JobResult.to_json()`: `{"job", "tables": {name:
{"columns": [...], "rows": [{column: value}]}}, "charts": {name: {"x": [...], "y": {series:
[...]}}}, "params"}`.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse

from controlcenter.analysis.columns import Column, column
from controlcenter.models import AnalysisRun


class NoSuchTable(LookupError):
    pass


@dataclass(frozen=True)
class ResultTable:
    name: str
    columns: list[str]
    rows: list[list[Any]]  # in column order

    @property
    def title(self) -> str:
        return title(self.name)

    @property
    def headers(self) -> list[Column]:
        return [column(c) for c in self.columns]

    @property
    def cells(self) -> list[list[Cell]]:
        """Each row as people read it."""
        headers = self.headers
        return [[Cell(h.show(v), v, h.numeric, h.link if v not in (None, "") else None)
                 for h, v in zip(headers, row, strict=True)] for row in self.rows]


@dataclass(frozen=True)
class Cell:
    text: str  # as shown
    value: Any  # exact, as the job returned it
    numeric: bool  # right-aligned
    link: str | None  # the URL name of the page the value names (a group's, a topic's)


def title(name: str) -> str:
    """`messages_per_partition` -> "Messages per partition"."""
    return name.replace("_", " ").capitalize()


def tables(result: dict[str, Any] | None) -> list[ResultTable]:
    out = []
    for name, table in ((result or {}).get("tables") or {}).items():
        columns = list(table.get("columns") or [])
        rows = [[row.get(c) for c in columns] for row in table.get("rows") or []]
        out.append(ResultTable(name, columns, rows))
    return out


def download(run: AnalysisRun, fmt: str, table: str | None) -> HttpResponse:
    stem = f"millrace-{run.job}-run{run.pk}"
    if fmt == "json":
        response = HttpResponse(json.dumps(run.result, indent=2),
                                content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{stem}.json"'
        return response
    if fmt != "csv":
        raise NoSuchTable(f"No format {fmt!r}: json or csv.")
    chosen = next((t for t in tables(run.result) if t.name == table), None)
    if chosen is None:
        names = ", ".join(t.name for t in tables(run.result))
        raise NoSuchTable(f"No table {table!r} in this result; one of: {names}.")
    response = HttpResponse(to_csv(chosen), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{stem}-{chosen.name}.csv"'
    return response


def to_csv(table: ResultTable) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(table.columns)
    writer.writerows(["" if v is None else v for v in row] for row in table.rows)
    return buffer.getvalue()
