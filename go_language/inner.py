"""Cuts inside a long top-level declaration: a function's body, a grouped declaration
(``const (``, ``var (``, ``type (``, ``import (``), or a variable's composite literal
(``var x = T{``), whose lines gofmt lays at one tab; on the left also at the last clause of
a long ``switch``/``select`` at a function body's first level (`switch_cut`).

A window that would hold a whole long declaration is cut again at one of those lines, under a
synthetic opening (`Frame.left_header`: ``func _() {`` or ``var (``) on the left and before a
synthetic closing (``}`` or ``)``) on the right.  The cut is exact because the synthetic closing
can only complete the window at a statement (or spec) boundary of the declaration's own body:

* left: the skipped part ``L[top:s]`` must end with a ``;`` (a ``,`` in a literal, or the
  opening bracket) and parse
  when the closing follows it (`prefix_parses`); the parser's state at ``s`` is then that of a
  fresh body, which the synthetic opening reproduces;
* right: if ``L_w + M + R[:t]`` + closing parses, the state at ``t`` is again a body boundary,
  and the whole file parses iff ``R[t:e]`` parses after a fresh opening (`rest_parses`).

Both checks are made lazily, for mode ``exact`` (as the text outside the windows is).  A
``const`` group is special: its first spec must have values, so the left opening carries one
(``_ = 0``) and the skipped part must hold one (it ends with ``;``), and the right check uses a
bare opening, which accepts less (a sound choice).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .grammar import parses
from .lexer import LexError, lex

HEADER = "package _\n"
#: A window longer than this (characters) is cut again inside its declaration.
INNER_CHARS = 1_500
#: Cut lines tried, nearest first.
MAX_TRIES = 4

#: A statement line of a function body: one tab, then not a closer, a comment, a clause, nor a
#: label (gofmt puts a label one level out, so ``\tinner:`` labels a statement of a nested
#: block, and a cut there would split that block).
_FUNC_LINE = re.compile(r"(?m)^\t(?![\s})\]/]|case\b|default\b|[^\W\d]\w*:(?!=))")
_GROUP_LINE = re.compile(r"(?m)^\t(?![\s})\]/])")
_GROUP = re.compile(r"(const|var|type|import)\s*\(")
#: ``var x = T{`` with a named, slice, array or map type: a composite literal's elements.
_LITERAL = re.compile(r"var\s+\w+\s*=\s*(?:\[[^\]\n]*\]|map\[[\w.*\[\]]+\])*[\w.*\[\]]*\{\n")
_LITERAL_LINE = re.compile(r"(?m)^\t(?![\s})\]/])")


@dataclass(frozen=True)
class Frame:
    """A kind of long declaration and its synthetic openings and closing."""

    opener: str  # how its body opens in the file ("{\n" or "(\n")
    left_header: str  # before the left window's first body line
    right_header: str  # before R's rest, for its check
    closer: str  # after R's window
    lines: re.Pattern[str]  # the body's lines that may start a window
    needs_spec: bool = False  # a const group: the skipped part must hold a spec
    ends: tuple[str, ...] = (";", "{", "(")  # tokens the skipped part may end with
    switch_at: int | None = None  # a cut at a clause: where its switch line starts (from top)


FUNC = Frame("{\n", "func _() {\n", "func _() {\n", "}\n", _FUNC_LINE)
#: Elements of a composite literal: the grammar reads every literal value alike, whatever its
#: type, and after a ``,`` it continues as after the opening ``{``.
LITERAL = Frame("{\n", "var _ = x{\n", "var _ = x{\n", "}\n", _LITERAL_LINE, ends=(",", "{"))


def frame_at(left: str, top: int) -> Frame | None:
    """The frame of the top-level declaration starting at `top`, if it has one."""
    if left.startswith("func", top):
        return FUNC
    lit = _LITERAL.match(left, top)
    if lit and not any(w in lit.group() for w in ("struct", "interface", "func", "chan")):
        return LITERAL  # (with those words the brace may open a type, not a literal)
    m = _GROUP.match(left, top)
    if m is None:
        return None
    kw = m.group(1)
    first = "\t_ = 0\n" if kw == "const" else ""
    return Frame("(\n", f"{kw} (\n{first}", f"{kw} (\n", ")\n", _GROUP_LINE,
                 needs_spec=kw == "const")


def left_cuts(left: str, top: int, frame: Frame) -> list[int]:
    """Body lines of the declaration at `top` where the left window may start, nearest first
    (not the cursor's own line: half typed, it may yet become a `case` or a closing)."""
    body = left.find(frame.opener, top)
    if body < 0:
        return []
    cursor_line = left.rfind("\n") + 1
    lines = [m.start() for m in frame.lines.finditer(left, body + len(frame.opener),
                                                         cursor_line)]
    return [s for s in reversed(lines[-MAX_TRIES:]) if not left.count("`", 0, s) % 2]


_CLAUSE_LINE = re.compile(r"(?m)^\t(?:case\b|default\b)")
_ONE_TAB_LINE = re.compile(r"(?m)^\t(?=\S)")
_SWITCH_LINE = re.compile(r"\t(?:switch|select)\b[^\n]*\{\n")


def switch_cut(left: str, top: int, after: int) -> tuple[int, Frame] | None:
    """A cut at the last clause line (``case``, ``default``) of a switch or select at the
    first level of the function body at `top`, when it lies past `after` (the nearest plain
    body line): the window then opens with the function's and the switch's own first line.

    Exact because the window's state after that switch line (its clause list) and the file's
    state at a clause boundary of the same switch agree once the clause's keyword is read,
    and the text at the cut starts with it; `prefix_parses` checks that the cut is one."""
    cursor_line = left.rfind("\n") + 1
    clauses = [m.start() for m in _CLAUSE_LINE.finditer(left, max(after, top), cursor_line)]
    if not clauses:
        return None
    cut = clauses[-1]
    level = [m.start() for m in _ONE_TAB_LINE.finditer(left, top, cursor_line)]
    if any(not _CLAUSE_LINE.match(left, k) for k in level if k > cut):
        return None  # the switch may have ended before the cursor
    before = [k for k in level if k < cut and not _CLAUSE_LINE.match(left, k)]
    sw = _SWITCH_LINE.match(left, before[-1]) if before else None
    if sw is None or left.count("`", 0, cut) % 2:
        return None
    frame = Frame("{\n", FUNC.left_header + sw.group(), FUNC.right_header, "}\n}\n",
                  _FUNC_LINE, ends=(";", ":", "{"), switch_at=sw.start() - top)
    return cut, frame


def right_cut(right: str, end: int, frame: Frame) -> int | None:
    """The first body line of R's window past its first line, if the window (``right[:end]``)
    is long; None when there is none or the cut may lie in a string or comment."""
    if end <= INNER_CHARS:
        return None
    first = right.find("\n")
    if first < 0:
        return None
    lines = [m.start() for m in frame.lines.finditer(right, first + 1, end)]
    if frame.needs_spec:  # a const spec with values, so that the bare opening can take it
        lines = [t for t in lines if "=" in right[t:right.find("\n", t)]]
    lines = lines[:3]
    for k, cut in enumerate(lines):
        nxt = lines[k + 1] if k + 1 < len(lines) else end
        if not right.count("`", cut) % 2 and lexes_closed(right[:cut]) \
                and lexes_closed(right[cut:nxt]):
            return cut
    return None


def lexes_closed(text: str) -> bool:
    """Nothing (a string, a comment) is left open at the end of `text`, read as code."""
    try:
        lexed = lex(text)
    except LexError:
        return True  # not readable as code from here: no evidence against the cut
    return not text[lexed.tail:].strip()


def prefix_parses(frame: Frame, text: str) -> bool:
    """Whether `text`, a declaration's start cut at a body line, ends at a boundary of its
    body: its tokens end with a ``;`` (or the opening bracket), and the closing after it
    completes the declaration."""
    try:
        lexed = lex(text)
    except LexError:
        return False
    ends = (";",) if frame.needs_spec else frame.ends
    if lexed.tail != len(text) or not lexed.kinds or lexed.kinds[-1] not in ends:
        return False
    sw = frame.switch_at
    if sw is not None and not (prefix_parses(FUNC, text[:sw]) and _stays_open(text[sw:])):
        return False
    return parses_cached(text + frame.closer, True)


def _stays_open(text: str) -> bool:
    """Whether the block a switch line opens (its first ``{``) is still open at the end of
    `text`, one level deep."""
    try:
        kinds = lex(text).kinds
    except LexError:
        return False
    depth = 0
    for k, kind in enumerate(kinds):
        if kind in ("(", "[", "{"):
            depth += 1
        elif kind in (")", "]", "}"):
            depth -= 1
            if depth <= 0 and "{" in kinds[:k]:
                return False
    return depth == 1


def rest_parses(frame: Frame, text: str) -> bool:
    """Whether `text` is the rest of a body (lines, then its closing) after a fresh opening."""
    return parses_cached(frame.right_header + text, True)


@functools.lru_cache(maxsize=4096)
def parses_cached(text: str, header: bool) -> bool:
    """`grammar.parses`, remembered by content, with the synthetic package clause."""
    return parses(HEADER + text if header else text)
