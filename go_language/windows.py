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
raw string or a general comment.  The left window is lexed (a cut inside a raw string makes the
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


def find_left_window(left: str, windowing: bool = True) -> LeftWindow | None:
    """The left window (see the module docstring), or None when the left text does not lex."""
    cuts = [m.start() for m in _DECL_LINE.finditer(left)] if windowing else []
    tries = [c for c in reversed(cuts) if c > 0][:MAX_LEFT_TRIES] + [0]
    for start in tries:
        text = (HEADER if start else "") + left[start:]
        try:
            lexed = lex(text)
        except LexError:
            continue
        pending = text[lexed.tail:]
        if start and pending[:1] in ("`", "/") and "\n" in pending:
            continue  # an open raw string or comment across lines: the cut may lie in one
        return LeftWindow(start, text, lexed.kinds, pending, lexed.ins)
    return None


def right_cuts(right: str, windowing: bool = True) -> list[int]:
    """Where R's window may end, nearest first; R's end is always the last."""
    if not windowing:
        return [len(right)]
    found = [m.start() for m in _DECL_LINE.finditer(right) if m.start() > 0]
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


@functools.lru_cache(maxsize=16)
def outside_parses(text: str, header: bool) -> bool:
    """Whether a text outside the windows parses on its own (remembered by content: it stays
    the same while the user edits inside the windows)."""
    return parses(HEADER + text if header else text)
