"""Scanning f-strings (PEP 701) as single lexemes.

F-strings nest (`f"{f'{x}'}"`, and since Python 3.12 even with the same quote), so they are not
a regular language; the lexer scans them with this small recursive scanner instead of a regex.
The replacement fields are scanned structurally (brackets, nested strings, conversions, format
specs with nested fields) to find where the f-string ends; the expressions themselves are
checked by `fstring_fields_valid` once the lexeme is complete.

`scan_fstring(text, pos, end)` returns the index just after the f-string that starts at `pos`,
`-1` when `text[pos:end]` is an unfinished but still possible f-string, or `None` when it can
never become one (e.g. a line break in a single-quoted literal part, or a NUL anywhere:
CPython refuses a source that holds one).
"""

from __future__ import annotations

import regex

from lexer.cpython import parses

FSTRING_START = regex.compile(r"(?i:rf|fr|f)('''|\"\"\"|'|\")")
_PLAIN_START = regex.compile(r"(?i:rb|br|r|b|u|rf|fr|f)?('''|\"\"\"|'|\")")

INCOMPLETE = -1


def scan_fstring(text: str, pos: int, end: int, fields: list | None = None) -> int | None:
    """End of the f-string at `pos`, INCOMPLETE, or None; `fields` collects expression spans."""
    m = FSTRING_START.match(text, pos, end)
    if m is None:
        return None
    raw = "r" in text[pos:m.start(1)].lower()
    return _scan_literal(text, m.end(), end, m.group(1), raw, fields)


def _scan_literal(text: str, i: int, end: int, quote: str, raw: bool,
                  fields: list | None = None) -> int | None:
    single = len(quote) == 1
    while i < end:
        c = text[i]
        if c == "\x00":
            return None
        if c == "\\":
            if i + 1 >= end:
                return INCOMPLETE
            nxt = text[i + 1]
            if nxt == "\x00":
                return None
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
            r = _scan_field(text, i + 1, end, quote, fields)
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


MAX_SPEC_NESTING = 2  # CPython: "f-string: expressions nested too deeply"


def _scan_field(text: str, i: int, end: int, quote: str,
                fields: list | None = None, level: int = 0) -> int | None:
    """Scan a replacement field's expression (after `{`); return the index after its `}`."""
    depth = 0
    start = i  # of the expression
    expr_end: int | None = None

    def close(at: int) -> None:
        if fields is not None:
            fields.append((start, at if expr_end is None else expr_end))

    while i < end:
        c = text[i]
        if c == "\x00":
            return None
        if c in "([{":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                return None
        elif c == "}":
            if depth == 0:
                close(i)
                return i + 1
            depth -= 1
        elif c == "=" and depth == 0 and expr_end is None and text[i - 1] not in "=!<>:" \
                and _self_documenting(text, i + 1, end):
            expr_end = i  # a self-documenting `{x=}`, `{x = !r:>8}`
        elif c == "#":
            nl = text.find("\n", i, end)
            if nl < 0:
                return INCOMPLETE
            i = nl
            continue
        elif c in "'\"":
            lit = i
            while lit > 0 and text[lit - 1].isalpha() and i - lit < 2:
                lit -= 1
            r = _scan_nested_string(text, lit, i, end)
            if r is None or r == INCOMPLETE:
                return r
            i = r
            continue
        elif c == "!" and depth == 0:
            if i + 1 >= end:
                return INCOMPLETE
            if text[i + 1] != "=":
                # A conversion: one of !r !s !a, then the format spec or the end of the field.
                if text[i + 1] not in "rsa":
                    return None
                after = i + 2
                while after < end and text[after] in " \t":
                    after += 1  # white space may follow the conversion (3.12)
                if after >= end:
                    return INCOMPLETE
                if text[after] not in ":}":
                    return None
                if expr_end is None:
                    expr_end = i
                i = after
                continue
        elif c == ":" and depth == 0:
            close(i)
            return _scan_spec(text, i + 1, end, quote, fields, level)
        elif c == "\\":
            return None  # backslashes are not allowed in expressions before 3.12
        i += 1
    return INCOMPLETE


def _self_documenting(text: str, i: int, end: int) -> bool:
    """Whether the `=` before `i` ends a replacement field's expression (not `==`)."""
    while i < end and text[i] in " \t\n\r":
        i += 1
    return i < end and text[i] in "}!:#"


def _scan_spec(text: str, i: int, end: int, quote: str,
               fields: list | None = None, level: int = 0) -> int | None:
    single = len(quote) == 1
    while i < end:
        c = text[i]
        if c == "{":
            if level + 1 > MAX_SPEC_NESTING:
                return None
            r = _scan_field(text, i + 1, end, quote, fields, level + 1)
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

    The whole f-string is tried first. An interpreter older than 3.12 rejects some valid
    PEP 701 f-strings (the outer quote reused inside a field, comments, backslashes and
    deeper nesting in fields); then each replacement field's expression is parsed on its own.
    """
    if parses(lexeme, "eval"):
        return True
    fields: list[tuple[int, int]] = []
    if scan_fstring(lexeme, 0, len(lexeme), fields) != len(lexeme):
        return False
    return all(_expression_valid(lexeme[start:stop]) for start, stop in fields)


def _expression_valid(expr: str) -> bool:
    """A replacement field's expression parses, its own f-strings validated recursively."""
    if not expr.strip():
        return False
    if _parses_as_expression(expr):
        return True
    # Replace each f-string inside the expression (which the older parser may not read) by a
    # placeholder once it is validated on its own, then parse what remains.
    out = []
    i = 0
    while i < len(expr):
        c = expr[i]
        boundary = i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] == "_")
        if boundary and FSTRING_START.match(expr, i):
            stop = scan_fstring(expr, i, len(expr))
            if stop is None or stop < 0 or not fstring_fields_valid(expr[i:stop]):
                return False
            out.append("0")
            i = stop
            continue
        if c in "'\"":
            stop = _scan_nested_string(expr, i, i, len(expr))
            if stop is None or stop < 0:
                return False
            out.append(expr[i:stop])
            i = stop
            continue
        out.append(c)
        i += 1
    return _parses_as_expression("".join(out))


def _parses_as_expression(expr: str) -> bool:
    return parses("(" + expr + "\n)", "eval")
