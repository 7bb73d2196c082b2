"""Python's layout: the indentation stack, bracket depth and line-start state, and the names of
the terminals the lexer makes from layout.

`Layout` is an immutable tuple so that recognizer states can share it freely.

Indentation follows CPython: a tab advances the column to the next multiple of 8, a form feed
resets it, and every level is also measured with tabs counted as one column (`alt`); the two
measures must order the levels the same way, otherwise the indentation is ambiguous and CPython
raises TabError — so do we.

`LayoutTerminals` names the terminals layout produces (NEWLINE, INDENT, DEDENT). It is the one
place those names are spelled: the tokenizer is configured with it (as lark's `Indenter` is
configured with its terminal types), and code that reasons about layout symbols reads them
from the tokenizer's configuration instead of repeating the strings.
"""

from __future__ import annotations

from typing import NamedTuple

Level = tuple[int, int]  # (column with tabs to multiples of 8, column with tabs as 1)


class LayoutTerminals(NamedTuple):
    """Names of the layout terminals; the defaults are CPython's token names."""

    newline: str = "NEWLINE"  # ends a logical line that has content
    indent: str = "INDENT"  # opens a deeper indentation level
    dedent: str = "DEDENT"  # closes one level

    def for_change(self, change: int) -> list[str]:
        """The terminals of an indentation change: +1 is one INDENT, -k are k DEDENTs."""
        return [self.indent] if change > 0 else [self.dedent] * -change


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


class LayoutError(Exception):
    """Inconsistent indentation (CPython's IndentationError / TabError)."""


def advance_ws(col: int, alt: int, ws: str) -> Level:
    """The indentation after the white space `ws`, from (col, alt)."""
    for ch in ws:
        if ch == " ":
            col += 1
            alt += 1
        elif ch == "\t":
            col = (col // 8 + 1) * 8
            alt += 1
        else:  # form feed
            col = alt = 0
    return col, alt


def leading_ws(text: str, start: int) -> str:
    """The spaces, tabs and form feeds at `start`."""
    end = start
    while end < len(text) and text[end] in " \t\f":
        end += 1
    return text[start:end]


def line_start(stack: tuple[Level, ...], level: Level) -> tuple[int, tuple[Level, ...]]:
    """A logical line's first content token at indentation `level`: the change (+1 for an
    INDENT, -k for k DEDENTs, 0) and the stack after it. Raises `LayoutError` as CPython."""
    col, alt = level
    top_col, top_alt = stack[-1]
    if col == top_col:
        if alt != top_alt:
            raise LayoutError("inconsistent use of tabs and spaces in indentation")
        return 0, stack
    if col > top_col:
        if alt <= top_alt:
            raise LayoutError("inconsistent use of tabs and spaces in indentation")
        return 1, stack + (level,)
    n = len(stack)
    while n > 1 and stack[n - 1][0] > col:
        n -= 1
    if stack[n - 1] != level:
        if stack[n - 1][0] != col:
            raise LayoutError("unindent does not match any outer indentation level")
        raise LayoutError("inconsistent use of tabs and spaces in indentation")
    return n - len(stack), stack[:n]
