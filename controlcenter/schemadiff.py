"""Side-by-side diff of two Avro schemas as people read them: pretty-printed JSON of the
registry's canonical text (two-space indent, the registry's attribute order), line by line.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass


def pretty(schema_text: str) -> str:
    """The schema as indented JSON; text that is not JSON (never stored) as it is."""
    try:
        return json.dumps(json.loads(schema_text), indent=2, ensure_ascii=False)
    except ValueError:
        return schema_text


@dataclass(frozen=True)
class Side:
    number: int | None  # line number, None for padding opposite an insertion/deletion
    text: str
    change: str  # "" unchanged, "del", "add", "chg"


@dataclass(frozen=True)
class Row:
    left: Side
    right: Side


_BLANK = Side(None, "", "")


def side_by_side(old: str, new: str) -> list[Row]:
    """Rows of (old line, new line): equal lines side by side, replaced lines paired,
    deleted lines against a blank on the right, inserted ones against a blank on the left."""
    a, b = pretty(old).splitlines(), pretty(new).splitlines()
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
