"""Syntax highlighting of schema text (Avro and JSON Schema as JSON, Protobuf as .proto),
done on the server with Pygments' lexers, one line at a time for the pages' `<pre>`s and
the side-by-side diff.

The whole text is tokenized at once (a string or comment spanning lines keeps its colour)
and then cut into lines; each token becomes `<span class="hl-KIND">` for the few kinds the
stylesheet colours (`frontend/css/groups.css`, light and dark), everything HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# Pygments ships no types; imported untyped, as the registry imports jsonschema
from pygments.lexer import Lexer  # type: ignore[import-untyped]
from pygments.lexers.data import JsonLexer  # type: ignore[import-untyped]
from pygments.lexers.dsls import ProtoBufLexer  # type: ignore[import-untyped]
from pygments.token import (  # type: ignore[import-untyped]
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
)
from pygments.token import _TokenType as TokenType

from registry.formats import PROTOBUF

# Checked in order: the first a token type is within decides its class.
KINDS: tuple[tuple[TokenType, str], ...] = (
    (Comment, "comment"),
    (Keyword.Type, "type"),
    (Keyword, "keyword"),
    (Name.Tag, "key"),  # JSON object keys
    (String, "string"),
    (Number, "number"),
    (Name.Class, "type"),
    (Name.Namespace, "type"),
    (Punctuation, "punct"),
    (Operator, "punct"),
)


def lexer(schema_type: str) -> Lexer:
    return ProtoBufLexer(stripnl=False) if schema_type == PROTOBUF else JsonLexer(stripnl=False)


def lines(text: str, schema_type: str) -> list[SafeString]:
    """`text` as highlighted HTML, one entry per line (as `text.splitlines()` cuts it)."""
    out: list[str] = []
    current: list[str] = []
    for token, value in lexer(schema_type).get_tokens(text):
        for i, piece in enumerate(value.split("\n")):
            if i:
                out.append("".join(current))
                current = []
            if piece:
                current.append(_span(token, piece))
    if current:
        out.append("".join(current))
    wanted = len(text.splitlines())
    out = (out + [""] * wanted)[:wanted]  # Pygments adds a final newline of its own
    return [mark_safe(line) for line in out]  # every piece went through escape()


def _span(token: TokenType, text: str) -> str:
    kind = _kind(token)
    return f'<span class="hl-{kind}">{escape(text)}</span>' if kind else str(escape(text))


def _kind(token: TokenType) -> str:
    for parent, kind in KINDS:
        if token in parent:
            return kind
    return ""


def block(text: str, schema_type: str) -> SafeString:
    """The whole text highlighted, for a `<pre>`."""
    return _join(lines(text, schema_type))


def _join(parts: Iterable[str]) -> SafeString:
    return mark_safe("\n".join(parts))  # the parts are lines() output
