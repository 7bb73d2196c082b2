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

Inside a long declaration (a function, a grouped declaration) the windows are cut again at its
body lines (`go_language.inner`).

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

import re
from dataclasses import dataclass

from .inner import (
    FUNC,
    HEADER,
    INNER_CHARS,
    Frame,
    frame_at,
    left_cuts,
    lexes_closed,
    parses_cached,
    switch_cut,
)
from .lexer import LexError, lex

_DECL_LINE = re.compile(r"(?m)^(?:func|type|var|const|import)\b")
#: Right cuts: not at ``import`` lines (an import after the window's declarations would be
#: judged apart from them, and imports may not follow declarations).
_RIGHT_DECL_LINE = re.compile(r"(?m)^(?:func|type|var|const)\b")
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
    frame: Frame | None = None  # the declaration's frame, when cut inside it (`inner`)


def find_left_window(left: str, windowing: bool = True) -> LeftWindow | None:
    """The left window (see the module docstring), or None when the left text does not lex."""
    cuts = [m.start() for m in _DECL_LINE.finditer(left)] if windowing else []
    # A cut after an odd number of backquotes lies in a raw string (when the backquotes are
    # all raw strings' quotes, as they nearly always are): not a cut.
    tries = [c for c in reversed(cuts) if c > 0 and not left.count("`", 0, c) % 2]
    tries = tries[:MAX_LEFT_TRIES] + [0]
    for start in tries:
        # Inside a long declaration, first a cut in its body (the whole need not be lexed).
        frame = frame_at(left, start) if windowing and len(left) - start > INNER_CHARS else None
        inner = _inner_left(left, start, frame) if frame is not None else None
        if inner is not None:
            return inner
        text = (HEADER if start else "") + left[start:]
        try:
            lexed = lex(text)
        except LexError:
            continue
        pending = text[lexed.tail:]
        if start and pending[:1] in ("`", "/") and "\n" in pending:
            continue  # an open raw string or comment across lines: the cut may lie in one
        return LeftWindow(start, text, lexed.kinds, pending, lexed.ins, start)
    return None


def _inner_left(left: str, top: int, frame: Frame) -> LeftWindow | None:
    """The left window cut at the last body line of the declaration at `top`, under the
    frame's synthetic opening (None when no such line lexes cleanly)."""
    cuts = [(s, frame) for s in left_cuts(left, top, frame)]
    if frame is FUNC:  # in a long switch, its last clause may lie nearer than any statement
        clause = switch_cut(left, top, cuts[0][0] if cuts else top)
        cuts = ([clause] if clause else []) + cuts
    for start, frame in cuts:
        text = HEADER + frame.left_header + left[start:]
        try:
            lexed = lex(text)
        except LexError:
            continue
        pending = text[lexed.tail:]
        if pending[:1] in ("`", "/") and "\n" in pending:
            continue
        return LeftWindow(start, text, lexed.kinds, pending, lexed.ins, top, frame)
    return None


def right_cuts(right: str, windowing: bool = True) -> list[int]:
    """Where R's window may end, nearest first; R's end is always the last."""
    if not windowing:
        return [len(right)]
    found = [m.start() for m in _RIGHT_DECL_LINE.finditer(right)
             if m.start() > 0 and not right.count("`", m.start()) % 2]
    out: list[int] = []
    for k, end in enumerate(found[:MAX_RIGHT_CANDIDATES]):
        # The declaration after the cut must not be left open either (the cut would lie in a
        # string the middle opens); a long one is not lexed for it (the outside check stays).
        nxt = min(found[k + 1] if k + 1 < len(found) else len(right), end + 4_000)
        if lexes_closed(right[:end]) and (nxt == end + 4_000 or lexes_closed(right[end:nxt])):
            out.append(end)
    return out + [len(right)]


def outside_parses(text: str, header: bool) -> bool:
    """Whether a text outside the windows parses on its own, as a file (`header` False) or as
    declarations after one.  It is judged in chunks cut at top-level declaration lines, each
    remembered by content, so an edit elsewhere re-parses only the chunk it touched.  If every
    chunk parses so does the text (the cut lemma above); else the text is parsed whole."""
    cuts = [m.start() for m in _RIGHT_DECL_LINE.finditer(text) if m.start() > 0]
    bounds = [0, *cuts, len(text)]
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    if all(parses_cached(chunk, header or k > 0) for k, chunk in enumerate(chunks)):
        return True
    return len(chunks) > 1 and parses_cached(text, header)
