"""Where a Go file may be cut around the cursor, so that a request costs the size of the
enclosing declaration, not of the file.

*Soundness of a top-level cut.*  A Go file is ``package p; imports; (decl ;)*``.  Before a
line that starts at column 0 with ``func``, ``type``, ``var``, ``const`` or ``import``, outside
any string or comment, the previous declaration has ended and its ``;`` has been inserted (a
newline follows a ``)``, ``}``, a name or a literal), and the scanner carries nothing across the
line start.  So ``L + M + R`` parses iff ``L[:c]`` is a complete file, ``package _`` +
``L[c:] + M + R[:e]`` parses, and ``package _`` + ``R[e:]`` parses, for such lines ``c`` of L
and ``e`` of R.  The synthetic ``package _`` header stands for the package clause the window
lacks; a window that starts at the file's start has none.

*Finding cuts without parsing.*  Such lines are found by a regular expression; one may lie in a
raw string or a general comment.  A line with an odd number of backquotes before it (on the
left) or after it (on the right) is not taken: it lies in a raw string when every backquote
quotes one, as nearly always.  The left window is lexed (a cut inside a raw string makes the
closing backquote open a new one, which fails to lex or is left open across lines at the
cursor: then the next earlier cut is tried, and at last the file's start), and a right cut
must leave nothing open both before it (R lexed from its start) and in the declaration after
it.  These checks only reject cuts.  Mode ``exact`` additionally requires
the two outside parts to parse (checked once per text and remembered), which makes the windowed
answer the whole file's.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .grammar import parses
from .lexer import LexError, lex

#: The synthetic package clause before a window that starts after the file's own.
HEADER = "package _\n"
_DECL_LINE = re.compile(r"(?m)^(?:func|type|var|const|import)\b")
#: Right cuts: not at ``import`` lines (an import after the window's declarations would be
#: judged apart from them, and imports may not follow declarations).
_RIGHT_DECL_LINE = re.compile(r"(?m)^(?:func|type|var|const)\b")
#: The synthetic opening of a function body, before a window cut inside one.
BODY_HEADER = "func _() {\n"
#: A statement of a top-level function's body in gofmt's layout: one tab, then code that is
#: not a closing bracket, a comment, or a switch/select clause.
_BODY_LINE = re.compile(r"(?m)^\t(?![\s})\]/]|case\b|default\b)")
#: A window longer than this (characters) is cut again inside its function's body.
INNER_CHARS = 1_500
#: Earlier left cuts tried when a later one does not lex.
MAX_LEFT_TRIES = 4
#: Right cuts tried, nearest first, before R's end.
MAX_RIGHT_CANDIDATES = 3


@dataclass(frozen=True)
class LeftWindow:
    """The left context from its last clean top-level cut, lexed."""

    start: int  # where the window begins in the left text
    text: str  # as parsed: the synthetic header (if cut) + left[start:]
    kinds: list[str]  # the certain tokens of `text`
    pending: str  # the pending lexeme at the cursor
    ins: bool  # the semicolon-insertion bit after `kinds`
    top: int  # the top-level declaration line the window is in (== start unless cut inside)


def find_left_window(left: str, windowing: bool = True) -> LeftWindow | None:
    """The left window (see the module docstring), or None when the left text does not lex."""
    cuts = [m.start() for m in _DECL_LINE.finditer(left)] if windowing else []
    # A cut after an odd number of backquotes lies in a raw string (when the backquotes are
    # all raw strings' quotes, as they nearly always are): not a cut.
    tries = [c for c in reversed(cuts) if c > 0 and not left.count("`", 0, c) % 2]
    tries = tries[:MAX_LEFT_TRIES] + [0]
    for start in tries:
        text = (HEADER if start else "") + left[start:]
        try:
            lexed = lex(text)
        except LexError:
            continue
        pending = text[lexed.tail:]
        if start and pending[:1] in ("`", "/") and "\n" in pending:
            continue  # an open raw string or comment across lines: the cut may lie in one
        if windowing and len(left) - start > INNER_CHARS and left.startswith("func", start):
            inner = _inner_left(left, start)
            if inner is not None:
                return inner
        return LeftWindow(start, text, lexed.kinds, pending, lexed.ins, start)
    return None


def _inner_left(left: str, top: int) -> LeftWindow | None:
    """The left window cut at the last body statement of the function at `top`, under a
    synthetic function header (None when no such line lexes cleanly)."""
    body = left.find("{\n", top)
    # Not the cursor's own line: half typed, it may yet become a `case` or a closing brace.
    cursor_line = left.rfind("\n") + 1
    lines = [m.start() for m in _BODY_LINE.finditer(left, body + 2, cursor_line)] \
        if body >= 0 else []
    for start in reversed(lines[-MAX_LEFT_TRIES:]):
        text = HEADER + BODY_HEADER + left[start:]
        try:
            lexed = lex(text)
        except LexError:
            continue
        pending = text[lexed.tail:]
        if pending[:1] in ("`", "/") and "\n" in pending:
            continue
        return LeftWindow(start, text, lexed.kinds, pending, lexed.ins, top)
    return None


def inner_right_cut(right: str, end: int) -> int | None:
    """The first body statement line of R's window past its first line, if the window
    (``right[:end]``) is long; None when there is none or the cut may lie in a string."""
    if end <= INNER_CHARS:
        return None
    first = right.find("\n")
    if first < 0:
        return None
    lines = [m.start() for m in _BODY_LINE.finditer(right, first + 1, end)][:3]
    for k, cut in enumerate(lines):
        nxt = lines[k + 1] if k + 1 < len(lines) else end
        if _lexes_closed(right[:cut]) and _lexes_closed(right[cut:nxt]):
            return cut
    return None


def right_cuts(right: str, windowing: bool = True) -> list[int]:
    """Where R's window may end, nearest first; R's end is always the last."""
    if not windowing:
        return [len(right)]
    found = [m.start() for m in _RIGHT_DECL_LINE.finditer(right)
             if m.start() > 0 and not right.count("`", m.start()) % 2]
    out: list[int] = []
    for k, end in enumerate(found[:MAX_RIGHT_CANDIDATES]):
        nxt = found[k + 1] if k + 1 < len(found) else len(right)
        if _lexes_closed(right[:end]) and _lexes_closed(right[end:nxt]):
            out.append(end)
    return out + [len(right)]


def _lexes_closed(text: str) -> bool:
    """Nothing (a string, a comment) is left open at the end of `text`, read as code."""
    try:
        lexed = lex(text)
    except LexError:
        return True  # not readable as code from here: no evidence against the cut
    return not text[lexed.tail:].strip()


def outside_parses(text: str, header: bool) -> bool:
    """Whether a text outside the windows parses on its own, as a file (`header` False) or as
    declarations after one.  It is judged in chunks cut at top-level declaration lines, each
    remembered by content, so an edit elsewhere re-parses only the chunk it touched.  If every
    chunk parses so does the text (the cut lemma above); else the text is parsed whole."""
    cuts = [m.start() for m in _RIGHT_DECL_LINE.finditer(text) if m.start() > 0]
    bounds = [0, *cuts, len(text)]
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    if all(_parses_cached(chunk, header or k > 0) for k, chunk in enumerate(chunks)):
        return True
    return len(chunks) > 1 and _parses_cached(text, header)


def body_parses(text: str) -> bool:
    """Whether `text` is the rest of a function body (statements, then its closing brace)."""
    return _parses_cached(BODY_HEADER + text, True)


def body_prefix_parses(text: str) -> bool:
    """Whether `text`, a function declaration's start cut at a body statement line, ends at a
    statement boundary of the body: its tokens end with a ``;`` or the body's ``{``, and a
    ``}`` after it completes the declaration."""
    try:
        lexed = lex(text)
    except LexError:
        return False
    if lexed.tail != len(text) or not lexed.kinds or lexed.kinds[-1] not in (";", "{"):
        return False
    return _parses_cached(text + "}\n", True)


@functools.lru_cache(maxsize=4096)
def _parses_cached(text: str, header: bool) -> bool:
    return parses(HEADER + text if header else text)
