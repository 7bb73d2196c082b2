"""The left window: where parsing of the left context starts, and the state after it.

The left context is parsed from its last clean top-level boundary (`python_language.windows`)
rather than from the start of the file, and inside a large block from the last statement of
the block's body under a one-line synthetic header, so that the cost depends on the statement
around the cursor, not on the file. A boundary found line by line can lie inside a string; a
candidate whose text does not lex, or leaves a string open across lines at the cursor, gives
way to an earlier boundary (the file's start is always the last candidate).
"""

from __future__ import annotations

from dataclasses import dataclass

from lexer.layout import Layout
from lexer.tokenizer import Lexed, LexError, Tokenizer, Until
from quotient import RecognizerState, recognizer

from .grammar import python_grammar
from .windows import comment_resync_starts, inner_cut, left_boundaries

#: Characters: smaller top-level windows are not cut again inside their block.
INNER_CUT_MIN = 400
#: Budgets that keep setup well under a second on one statement of pathological size (a
#: 100,000-character line): beyond them the language degrades to mode "none" and says why.
MAX_WINDOW_TOKENS = 6000
#: CPython's tokenizer refuses more than 200 nested brackets ("too many nested parentheses").
MAX_NESTING = 200
#: Top-level boundaries tried, nearest first, before the file's start.
MAX_LEFT_CANDIDATES = 4


class WindowTooLarge(Exception):
    """The window exceeds a budget; the language degrades to mode "none"."""


@dataclass(frozen=True)
class LeftWindow:
    """The left context as parsed, and the recognizer state after its certain terminals."""

    start: int  # offset in the left context where the window begins
    text: str  # the window as lexed (with a synthetic header when cut inside a block)
    lexed: Lexed  # its certain terminals and the layout after them
    pending: str  # the uncertain tail at the cursor (not yet scanned)
    state: RecognizerState  # the grammar's recognizer after `lexed.terminals`
    body_column: int | None  # the block body's indentation when cut inside a block
    #: when cut inside a block: the block's header and body statements the cut left out
    #: (from `start`), which the window assumes complete; "" otherwise
    skipped: str = ""

    @property
    def layout(self) -> Layout:
        return self.lexed.layout


def find_left_window(tokenizer: Tokenizer, left: str, windowing: bool) -> LeftWindow | None:
    """The left window to parse, or None when no candidate is a valid prefix of Python.

    Raises `WindowTooLarge` when the window around the cursor exceeds a budget.
    """
    starts = left_boundaries(left)[:MAX_LEFT_CANDIDATES] + [0] if windowing else [0]
    found = None
    for start in dict.fromkeys(starts):
        got = _window_from(tokenizer, left, start, windowing)
        if got is None:
            continue
        if found is None:
            found = got
        # A pending tail across lines means an open string at the cursor -- or a boundary
        # guessed inside a string, whose closing quote now opens one. Look further back for a
        # window that agrees the cursor is not in a string.
        if "\n" not in got.pending:
            return got
    if found is None and windowing:
        # Nothing parses from any clean boundary: the text before the cursor is broken.
        # Pick up again at a column-0 comment after the breakage, as an error-recovering
        # reader would (the language then reports mode "window": the outside is broken).
        for start in comment_resync_starts(left)[:MAX_LEFT_CANDIDATES]:
            got = _window_from(tokenizer, left, start, windowing)
            if got is not None and "\n" not in got.pending:
                return got
    return found


def _window_from(tokenizer: Tokenizer, left: str, start: int, windowing: bool
                 ) -> LeftWindow | None:
    """The window from `start`, cut again inside a large block when possible; None when it
    is not a valid prefix of Python. The size budgets apply to the window actually used."""
    text = left[start:]
    try:
        lexed = tokenizer.lex(text, 0, len(text), Layout(), Until.CERTAIN)
    except LexError:
        return None
    column = None
    skipped = ""
    if windowing and len(text) > INNER_CUT_MIN:
        layout = lexed.layout
        cut = inner_cut(text, lexed, tokenizer, layout.col if layout.bol else None)
        if cut is not None:
            inner_text = cut.header + text[cut.offset:]
            try:
                inner = tokenizer.lex(inner_text, 0, len(inner_text), Layout(), Until.CERTAIN)
                skipped = text[:cut.offset]
                text, lexed, column = inner_text, inner, cut.column
            except LexError:
                pass
    if lexed.layout.depth > MAX_NESTING:
        raise WindowTooLarge(f"more than {MAX_NESTING} nested brackets (CPython refuses them)")
    if len(lexed.terminals) > MAX_WINDOW_TOKENS:
        raise WindowTooLarge(f"the statement around the cursor has more than "
                             f"{MAX_WINDOW_TOKENS} symbols")
    state = recognizer(python_grammar()).scan_many(lexed.terminals)
    if state is None:
        return None
    return LeftWindow(start, text, lexed, text[lexed.tail:], state, column, skipped)
