"""Scanning f-strings (PEP 701) as single lexemes.

F-strings nest (`f"{f'{x}'}"`, and since Python 3.12 even with the same quote), so they are not
a regular language; the lexer scans them with this small recursive scanner instead of a regex.
The replacement fields are scanned structurally (brackets, nested strings, conversions, format
specs with nested fields) to find where the f-string ends; the expressions themselves are
checked by `fstring_fields_valid` once the lexeme is complete.

`scan_fstring(text, pos, end)` returns the index just after the f-string that starts at `pos`,
`-1` when `text[pos:end]` is an unfinished but still possible f-string, or `None` when it can
never become one (e.g. a line break in a single-quoted literal part).
"""

from __future__ import annotations

import ast
import warnings

import regex

FSTRING_START = regex.compile(r"(?i:rf|fr|f)('''|\"\"\"|'|\")")
_PLAIN_START = regex.compile(r"(?i:rb|br|r|b|u|rf|fr|f)?('''|\"\"\"|'|\")")

INCOMPLETE = -1


def scan_fstring(text: str, pos: int, end: int) -> int | None:
    m = FSTRING_START.match(text, pos, end)
    if m is None:
        return None
    raw = "r" in text[pos:m.start(1)].lower()
    return _scan_literal(text, m.end(), end, m.group(1), raw)


def _scan_literal(text: str, i: int, end: int, quote: str, raw: bool) -> int | None:
    single = len(quote) == 1
    while i < end:
        c = text[i]
        if c == "\\":
            if i + 1 >= end:
                return INCOMPLETE
            nxt = text[i + 1]
            if not raw and nxt == "N" and i + 2 < end and text[i + 2] == "{":
                close = text.find("}", i + 3, end)
                if close < 0:
                    return INCOMPLETE
                i = close + 1
                continue
            if nxt in "{}":
                i += 1
                continue
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        if c == quote[0] and end - i < len(quote) and quote.startswith(text[i:end]):
            return INCOMPLETE
        if c == "\n" and single:
            return None
        if c == "{":
            if i + 1 >= end:
                return INCOMPLETE
            if text[i + 1] == "{":
                i += 2
                continue
            r = _scan_field(text, i + 1, end, quote)
            if r is None or r == INCOMPLETE:
                return r
            i = r
            continue
        if c == "}":
            if i + 1 >= end:
                return INCOMPLETE
            if text[i + 1] == "}":
                i += 2
                continue
            return None
        i += 1
    return INCOMPLETE


def _scan_field(text: str, i: int, end: int, quote: str) -> int | None:
    """Scan a replacement field's expression (after `{`); return the index after its `}`."""
    depth = 0
    while i < end:
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                return None
        elif c == "}":
            if depth == 0:
                return i + 1
            depth -= 1
        elif c in "'\"":
            start = i
            while start > 0 and text[start - 1].isalpha() and i - start < 2:
                start -= 1
            r = _scan_nested_string(text, start, i, end)
            if r is None or r == INCOMPLETE:
                return r
            i = r
            continue
        elif c == "!" and depth == 0:
            if i + 1 >= end:
                return INCOMPLETE
            if text[i + 1] != "=":
                i += 2  # the conversion letter
                continue
        elif c == ":" and depth == 0:
            return _scan_spec(text, i + 1, end, quote)
        elif c == "\\":
            return None  # backslashes are not allowed in expressions before 3.12
        i += 1
    return INCOMPLETE


def _scan_spec(text: str, i: int, end: int, quote: str) -> int | None:
    single = len(quote) == 1
    while i < end:
        c = text[i]
        if c == "{":
            r = _scan_field(text, i + 1, end, quote)
            if r is None or r == INCOMPLETE:
                return r
            i = r
            continue
        if c == "}":
            return i + 1
        if text.startswith(quote, i) or (c == "\n" and single):
            return None
        i += 1
    return INCOMPLETE


def _scan_nested_string(text: str, start: int, qpos: int, end: int) -> int | None:
    prefix = text[start:qpos].lower()
    if prefix and not _PLAIN_START.match(text, start, end):
        start, prefix = qpos, ""
    if "f" in prefix:
        return scan_fstring(text, start, end)
    m = _PLAIN_START.match(text, qpos, end)
    if m is None:
        return None
    quote = m.group(1)
    raw = "r" in prefix
    i = m.end()
    while i < end:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if text.startswith(quote, i):
            return i + len(quote)
        if c == "\n" and len(quote) == 1 and not raw:
            return None
        i += 1
    return INCOMPLETE


def fstring_fields_valid(lexeme: str) -> bool:
    """Whether a complete f-string's expressions parse (CPython's parser is the judge).

    The running interpreter may predate PEP 701; an f-string it cannot read because it reuses
    the outer quote inside a field is accepted (the structural scan already checked it).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(lexeme, mode="eval")
        return True
    except SyntaxError:
        m = FSTRING_START.match(lexeme)
        quote = m.group(1) if m else '"'
        body = lexeme[m.end():-len(quote)] if m else lexeme
        return quote in body or "\\" in body
    except (ValueError, MemoryError, RecursionError):
        return False
