"""Python's layout state: indentation stack, bracket depth and line-start bookkeeping.

The state is an immutable tuple so that recognizer states can share it freely.

Indentation follows CPython: a tab advances the column to the next multiple of 8, a form feed
resets it, and every level is also measured with tabs counted as one column (`alt`); the two
measures must order the levels the same way, otherwise the indentation is ambiguous and CPython
raises TabError — so do we.
"""

from __future__ import annotations

from typing import NamedTuple

NEWLINE = "NEWLINE"
INDENT = "INDENT"
DEDENT = "DEDENT"

Level = tuple[int, int]  # (column with tabs to multiples of 8, column with tabs as 1)


class Layout(NamedTuple):
    stack: tuple[Level, ...] = ((0, 0),)
    depth: int = 0  # bracket nesting depth
    bol: bool = True  # no content token yet on the current logical line
    col: int = 0  # leading whitespace of the current physical line
    alt: int = 0
    # A backslash continuation while `bol`: CPython takes the line's indentation from its
    # first physical line, so white space after the continuation does not count.
    frozen: bool = False
    # The text so far ends right after a line continuation: CPython refuses a file that ends
    # there ("unexpected EOF while parsing").
    joined: bool = False

    def after_newline(self) -> Layout:
        return self._replace(col=0, alt=0)

    def advance_ws(self, ch: str) -> Layout:
        if ch == " ":
            return self._replace(col=self.col + 1, alt=self.alt + 1)
        if ch == "\t":
            return self._replace(col=(self.col // 8 + 1) * 8, alt=self.alt + 1)
        return self._replace(col=0, alt=0)  # form feed


class LayoutError(Exception):
    """Inconsistent indentation (CPython's IndentationError / TabError)."""


def indent_tokens(layout: Layout) -> tuple[list[str], tuple[Level, ...]]:
    """Layout tokens before the first content token of a logical line at `layout.col`."""
    stack = layout.stack
    col, alt = layout.col, layout.alt
    top_col, top_alt = stack[-1]
    if col == top_col:
        if alt != top_alt:
            raise LayoutError("inconsistent use of tabs and spaces in indentation")
        return [], stack
    if col > top_col:
        if alt <= top_alt:
            raise LayoutError("inconsistent use of tabs and spaces in indentation")
        return [INDENT], stack + ((col, alt),)
    out: list[str] = []
    n = len(stack)
    while n > 1 and stack[n - 1][0] > col:
        n -= 1
        out.append(DEDENT)
    if stack[n - 1] != (col, alt):
        if stack[n - 1][0] != col:
            raise LayoutError("unindent does not match any outer indentation level")
        raise LayoutError("inconsistent use of tabs and spaces in indentation")
    return out, stack[:n]
