"""The Python tokenizer: text to terminals, batch or incrementally with an uncertain tail.

`Tokenizer.lex(text, pos, end, layout, until)` turns `text[pos:end]` into the grammar's
terminals, with NEWLINE / INDENT / DEDENT as CPython emits them. How the text ends is one
choice (`Until`):

* `Until.CERTAIN` stops at the first position whose lexeme is not yet *certain*: the text from
  there to `end` is still a prefix of some lexeme, so more text could make a longer match
  (maximal munch without lookahead). That uncertain tail is what the incremental recognizer
  keeps pending; it is exactly the paper's branching lexer (section V-A) with the "symbol ends
  here" branch taken lazily: the branch is resolved when the next character arrives or, at the
  end, when the right context is appended;
* `Until.BOUNDARY`: `end` is known to be a lexeme boundary, but the file goes on;
* `Until.EOF`: `end` is the end of the file (the last line gets its NEWLINE, every open block
  its DEDENT).

`Tokenizer.lex_symbolic` lexes text whose indentation stack is not known yet (the right context
of a completion): INDENT/DEDENT are left out and each logical line's indentation is recorded
instead (`Indentation`), to be rendered later against a guessed stack.

Tokens are returned as columns (`Lexed.terminals`, `Lexed.starts`) rather than one object per
token: the left context of every request and every fed character is lexed, and per-token
records cost a fifth of the lexing time (measured on argparse.py). `Lexed.tokens()` gives the
`Token` records when they are wanted.

Departures from plain maximal munch that CPython makes, reproduced here:
* `0or 1`, `0x`, `0b2`: a `0` directly followed by a base letter is an invalid literal;
* `1if x else y` is accepted (a number may be followed directly by a keyword from CPython's
  list), but `1abc` is an invalid decimal literal.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from lexer.cpython import parses
from lexer.fstrings import fstring_fields_valid
from lexer.layout import Layout, LayoutError, LayoutTerminals, Level, line_start
from lexer.lexemes import LexemeTable

OPENERS = frozenset("([{")
CLOSERS = frozenset(")]}")
_NUMBER_KEYWORDS = ("and", "else", "for", "if", "in", "is", "not", "or")
_NUMBER_TERMINALS = frozenset(
    ["DEC_NUMBER", "HEX_NUMBER", "OCT_NUMBER", "BIN_NUMBER", "FLOAT_NUMBER", "IMAG_NUMBER"]
)
_STRING_TERMINALS = ("STRING", "LONG_STRING", "BYTES", "LONG_BYTES")

_START = Layout()
_WS = frozenset(" \t\n\r\f")


class Until(Enum):
    """Where lexing stops, and what the end of the text means (see the module docstring)."""

    CERTAIN = "certain"
    BOUNDARY = "boundary"
    EOF = "eof"


class LexError(Exception):
    def __init__(self, message: str, pos: int):
        super().__init__(f"{message} (at offset {pos})")
        self.message = message
        self.pos = pos


class Token(NamedTuple):
    """One terminal: its name in the grammar and the offset of its first character (layout
    terminals carry the offset of the token they stand before)."""

    name: str
    start: int


class Lexed(NamedTuple):
    """Lexed text as token columns: ``terminals[k]`` starts at ``starts[k]``."""

    terminals: list[str]
    starts: list[int]
    layout: Layout  # the layout state at `tail`
    tail: int  # start of the uncertain tail (== end unless `Until.CERTAIN` stopped early)

    def tokens(self) -> list[Token]:
        return [Token(n, s) for n, s in zip(self.terminals, self.starts, strict=True)]


class Indentation(NamedTuple):
    """A logical line that starts at `level`, before ``terminals[index]``."""

    index: int
    level: Level


class SymbolicLexed(NamedTuple):
    """Text lexed without an indentation stack: no INDENT/DEDENT, and the indentation of
    every logical line's first token instead."""

    terminals: list[str]
    indents: list[Indentation]
    layout: Layout  # at `tail`; its stack is the one lexing started with
    tail: int


class Tokenizer:
    """Lexes Python text with a grammar's lexemes (see `lexer.lexemes.LexemeTable`)."""

    def __init__(self, table: LexemeTable, layout_terminals: LayoutTerminals | None = None):
        self.table = table
        self.layout_terminals = layout_terminals or LayoutTerminals()
        lit = table.literals
        self.openers = frozenset(lit[c] for c in OPENERS if c in lit)
        self.closers = frozenset(lit[c] for c in CLOSERS if c in lit)
        self.fstring = table.fstring_terminal
        self.strings = frozenset(n for n in _STRING_TERMINALS if n in table.terminals)

    def lex(self, text: str, pos: int = 0, end: int | None = None, layout: Layout = _START,
            until: Until = Until.EOF) -> Lexed:
        """Lex `text[pos:end]` starting in `layout`. Raises LexError on invalid text."""
        names: list[str] = []
        starts: list[int] = []
        out, tail = self._scan(text, pos, len(text) if end is None else end, layout, until,
                               names, starts, None)
        return Lexed(names, starts, out, tail)

    def lex_symbolic(self, text: str, pos: int = 0, end: int | None = None, depth: int = 0,
                     bol: bool = True, until: Until = Until.EOF) -> SymbolicLexed:
        """Lex `text[pos:end]` at bracket `depth` without an indentation stack.

        At the end of the file no DEDENTs are made: their number is forced by the grammar
        (every INDENT is closed), so the caller leaves it open.
        """
        names: list[str] = []
        starts: list[int] = []
        indents: list[Indentation] = []
        start = Layout(((0, 0),), depth, bol, 0, 0)
        out, tail = self._scan(text, pos, len(text) if end is None else end, start, until,
                               names, starts, indents)
        return SymbolicLexed(names, indents, out, tail)

    def _scan(self, text: str, pos: int, end: int, layout: Layout, until: Until,
              names: list[str], starts: list[int], indents: list[Indentation] | None
              ) -> tuple[Layout, int]:
        """The lexer's loop: appends to `names`/`starts` (and `indents` when symbolic) and
        returns the layout at the tail and the tail's offset."""
        # One function on purpose: a per-character hot loop; steps would cost calls per char.
        final = until is not Until.CERTAIN
        newline = self.layout_terminals.newline
        stack, depth, bol, col, alt, frozen, joined = layout
        i = pos
        tail = end
        while i < end:
            c = text[i]
            if joined and c != "\\":
                joined = False
            if c == "\n" or c == "\r":
                if depth == 0 and not bol:
                    names.append(newline)
                    starts.append(i)
                    bol = True
                col = alt = 0
                frozen = False
                i += 2 if c == "\r" and i + 1 < end and text[i + 1] == "\n" else 1
                continue
            if c == " " or c == "\t" or c == "\f":
                if bol and not frozen:
                    # layout.advance_ws, inlined: this branch runs for every blank.
                    if c == " ":
                        col += 1
                        alt += 1
                    elif c == "\t":
                        col = (col // 8 + 1) * 8
                        alt += 1
                    else:
                        col = alt = 0
                i += 1
                continue
            if c == "#":
                nl = _find_newline(text, i, end)
                nul = text.find("\0", i, nl if nl >= 0 else end)
                if nul >= 0:  # a comment is no exception: CPython refuses any NUL
                    raise LexError("source code cannot contain null bytes", nul)
                if nl >= 0:
                    i = nl
                    continue
                if not final:
                    tail = i
                # A comment at the end of final text simply ends there.
                break
            if c == "\\":
                if i + 1 >= end:
                    if final:
                        raise LexError("unexpected end of file after line continuation", i)
                    tail = i
                    break
                i = _skip_continuation(text, i, end)
                frozen = frozen or bol
                joined = True
                continue
            if c == "\0":
                raise LexError("source code cannot contain null bytes", i)
            found = self._certain_lexeme(text, i, end, final)
            if found is None:
                tail = i
                break
            name, e = found
            self._check_lexeme(name, text, i, e, end, final)
            if bol:
                frozen = False
                bol = False
                if indents is not None:
                    indents.append(Indentation(len(names), (col, alt)))
                else:
                    stack = self._indent(stack, (col, alt), i, names, starts)
            names.append(name)
            starts.append(i)
            if name in self.openers:
                depth += 1
            elif name in self.closers:
                depth -= 1
                if depth < 0:
                    raise LexError(f"unmatched {text[i]!r}", i)
            i = e
        if until is Until.EOF:
            if joined:  # CPython: "unexpected EOF while parsing"
                raise LexError("end of file right after a line continuation", end)
            if depth > 0:
                raise LexError("unexpected end of file inside brackets", end)
            if not bol:
                names.append(newline)
                starts.append(end)
                bol = True
            if indents is None:
                dedent = self.layout_terminals.dedent
                for _ in range(len(stack) - 1):
                    names.append(dedent)
                    starts.append(end)
                stack = stack[:1]
            col = alt = 0
        return Layout(stack, depth, bol, col, alt, frozen, joined), tail

    def _certain_lexeme(self, text: str, i: int, end: int, final: bool
                        ) -> tuple[str, int] | None:
        """The maximal-munch lexeme at `i` (terminal, end), or None when it is not certain
        yet (incremental lexing only: more text could still extend or complete it)."""
        table = self.table
        found = table.longest(text, i, end)
        if found is None:
            if not final and table.is_prefix(text, i, end):
                return None
            raise LexError(f"invalid token starting with {text[i]!r}", i)
        e = found[1]
        # A complete lexeme followed by white space is certain: no Python lexeme continues
        # a complete match with white space (strings end at their closing quote).
        if not final and (
            e == end or (text[e] not in _WS and table.is_prefix(text, i, e + 1))
        ) and table.is_prefix(text, i, end):
            return None
        return found

    def _check_lexeme(self, name: str, text: str, i: int, e: int, end: int, final: bool
                      ) -> None:
        """The checks CPython makes on a lexeme beyond its regular shape."""
        if name in _NUMBER_TERMINALS and e < end and _is_ident_char(text[e]):
            _check_number_suffix(text, i, e, end, final)
        elif name == self.fstring:
            if not fstring_fields_valid(text[i:e]):
                raise LexError("invalid expression in f-string", i)
        elif name in self.strings and not _string_valid(text, i, e):
            raise LexError("invalid string literal (escape or bytes content)", i)

    def _indent(self, stack: tuple[Level, ...], level: Level, i: int, names: list[str],
                starts: list[int]) -> tuple[Level, ...]:
        """Emit the INDENT/DEDENTs before a logical line's first token at `level`."""
        try:
            change, stack = line_start(stack, level)
        except LayoutError as err:
            raise LexError(str(err), i) from None
        if change:
            for t in self.layout_terminals.for_change(change):
                names.append(t)
                starts.append(i)
        return stack


def _skip_continuation(text: str, i: int, end: int) -> int:
    """Offset after the backslash continuation at `i` (its line break included)."""
    nxt = text[i + 1]
    if nxt == "\n":
        return i + 2
    if nxt == "\r":
        return i + 3 if i + 2 < end and text[i + 2] == "\n" else i + 2
    raise LexError("unexpected character after line continuation character", i)


def _check_number_suffix(text: str, start: int, e: int, end: int, final: bool) -> None:
    """A number followed directly by letters: only CPython's keyword exceptions pass."""
    lexeme = text[start:e]
    if lexeme.strip("0") == "" and text[e] in "oOxXbB":
        raise LexError(f"invalid literal {lexeme + text[e]!r}", start)
    j = e
    while j < end and _is_ident_char(text[j]):
        j += 1
    word = text[e:j]
    if word in _NUMBER_KEYWORDS:
        return
    if j == end and not final and any(k.startswith(word) for k in _NUMBER_KEYWORDS):
        return
    raise LexError("invalid decimal literal", start)


def _string_valid(text: str, start: int, end: int) -> bool:
    """Escapes and bytes contents, which CPython's parser checks inside string literals."""
    lexeme = text[start:end]
    quote = min((k for k in (lexeme.find("'"), lexeme.find('"')) if k >= 0), default=0)
    prefix = lexeme[:quote].lower()
    if "\\" not in lexeme and ("b" not in prefix or lexeme.isascii()):
        return True
    if "r" in prefix and ("b" not in prefix or lexeme.isascii()):
        return True
    return parses(lexeme, "eval")


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or (ord(ch) > 127 and ch.isidentifier())


def _find_newline(text: str, i: int, end: int) -> int:
    nl = text.find("\n", i, end)
    cr = text.find("\r", i, end)
    if cr >= 0 and (nl < 0 or cr < nl):
        return cr
    return nl
