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
    def cells(self) -> list[list[tuple[str, Any, bool]]]:
        """Each row as people read it: (shown text, the exact value, right-aligned)."""
        headers = self.headers
        return [[(h.show(v), v, h.numeric) for h, v in zip(headers, row, strict=True)]
                for row in self.rows]


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
