"""Side-by-side diff of two schemas as people read them, line by line: Avro and JSON Schema
as pretty-printed JSON of the registry's canonical text (two-space indent, the registry's
key order), Protobuf as its canonical .proto text. Each line also comes highlighted
(`highlight.py`) for the pages.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field

from django.utils.safestring import SafeString

from controlcenter import highlight
from registry.formats import AVRO, PROTOBUF


def pretty(schema_text: str, schema_type: str = AVRO) -> str:
    """The schema as people read it: JSON indented, .proto text as it is (and text that is
    not JSON, never stored, as it is)."""
    if schema_type == PROTOBUF:
        return schema_text
    try:
        return json.dumps(json.loads(schema_text), indent=2, ensure_ascii=False)
    except ValueError:
        return schema_text


@dataclass(frozen=True)
class Side:
    number: int | None  # line number, None for padding opposite an insertion/deletion
    text: str
    change: str  # "" unchanged, "del", "add", "chg"
    html: SafeString = field(default=SafeString(""), compare=False)  # `text` highlighted

    def as_json(self) -> dict[str, object]:
        return {"number": self.number, "text": self.text, "change": self.change}


@dataclass(frozen=True)
class Row:
    left: Side
    right: Side


_BLANK = Side(None, "", "")


def side_by_side(old: str, new: str, old_type: str = AVRO,
                 new_type: str | None = None) -> list[Row]:
    """Rows of (old line, new line): equal lines side by side, replaced lines paired,
    deleted lines against a blank on the right, inserted ones against a blank on the left."""
    new_type = new_type or old_type
    rows = _rows(pretty(old, old_type).splitlines(), pretty(new, new_type).splitlines())
    old_html = highlight.lines(pretty(old, old_type), old_type)
    new_html = highlight.lines(pretty(new, new_type), new_type)
    return [Row(_lit(r.left, old_html), _lit(r.right, new_html)) for r in rows]


def _lit(side: Side, html: list[SafeString]) -> Side:
    if side.number is None:
        return side
    return Side(side.number, side.text, side.change, html[side.number - 1])


def _rows(a: list[str], b: list[str]) -> list[Row]:
    rows = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [Row(Side(i + 1, a[i], ""), Side(j + 1, b[j], ""))
                     for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            continue
        lefts = [Side(i + 1, a[i], "del" if tag == "delete" else "chg") for i in range(i1, i2)]
        rights = [Side(j + 1, b[j], "add" if tag == "insert" else "chg") for j in range(j1, j2)]
        for k in range(max(len(lefts), len(rights))):
            left = lefts[k] if k < len(lefts) else _BLANK
            right = rights[k] if k < len(rights) else _BLANK
            if tag == "replace":  # a replaced block's extra lines are plain deletions/additions
                left = left if k < len(rights) or left is _BLANK else Side(left.number,
                                                                          left.text, "del")
                right = right if k < len(lefts) or right is _BLANK else Side(right.number,
                                                                            right.text, "add")
            rows.append(Row(left, right))
    return rows


def changed_lines(rows: list[Row]) -> int:
    return sum(1 for r in rows if r.left.change or r.right.change)
