"""The Python tokenizer: text to terminal names, batch or incrementally with an uncertain tail.

`Tokenizer.lex(text, pos, end, layout, final)` turns `text[pos:end]` into terminal names, with
NEWLINE / INDENT / DEDENT as CPython emits them. With `final=False` it stops at the first
position whose lexeme is not yet *certain*: the text from there to `end` is still a prefix of
some lexeme, so more text could make a longer match (maximal munch without lookahead). That
uncertain tail is what the incremental recognizer keeps pending; it is exactly the paper's
branching lexer (section V-A) with the "symbol ends here" branch taken lazily: the branch is
resolved when the next character arrives or, at the end, when the right context is appended.

Departures from plain maximal munch that CPython makes, reproduced here:
* `0or 1`, `0x`, `0b2`: a `0` directly followed by a base letter is an invalid literal;
* `1if x else y` is accepted (a number may be followed directly by a keyword from CPython's
  list), but `1abc` is an invalid decimal literal.
"""

from __future__ import annotations

from typing import NamedTuple

from lexer.cpython import parses
from lexer.fstrings import fstring_fields_valid
from lexer.layout import DEDENT, NEWLINE, Layout, LayoutError, indent_tokens
from lexer.lexemes import LexemeTable

OPENERS = frozenset("([{")
CLOSERS = frozenset(")]}")
_NUMBER_KEYWORDS = ("and", "else", "for", "if", "in", "is", "not", "or")
_NUMBER_TERMINALS = frozenset(
    ["DEC_NUMBER", "HEX_NUMBER", "OCT_NUMBER", "BIN_NUMBER", "FLOAT_NUMBER", "IMAG_NUMBER"]
)


_START = Layout()
_WS = frozenset(" \t\n\r\f")


class LexError(Exception):
    def __init__(self, message: str, pos: int):
        super().__init__(f"{message} (at offset {pos})")
        self.message = message
        self.pos = pos


class Lexed(NamedTuple):
    tokens: list[str]
    starts: list[int]
    layout: Layout  # the layout state at `tail`
    tail: int  # start of the uncertain tail (== end when everything is certain)


class Tokenizer:
    """Lexes Python text with a grammar's lexemes (see `lexer.lexemes.LexemeTable`)."""

    def __init__(self, table: LexemeTable):
        self.table = table
        lit = table.literals
        self.openers = frozenset(lit[c] for c in OPENERS if c in lit)
        self.closers = frozenset(lit[c] for c in CLOSERS if c in lit)
        self.fstring = table.fstring_terminal
        self.strings = frozenset(
            n for n in ("STRING", "LONG_STRING", "BYTES", "LONG_BYTES") if n in table.terminals)

    def lex(self, text: str, pos: int = 0, end: int | None = None, layout: Layout = _START,
            final: bool = True, eof: bool | None = None, events: bool = False) -> Lexed:
        """Lex `text[pos:end]` starting in `layout`. Raises LexError on invalid text.

        `final=False`: stop at the uncertain tail. `final=True, eof=False`: `end` is known to
        be a lexeme boundary but not the end of the file (no closing NEWLINE/DEDENTs).
        `events=True`: instead of INDENT/DEDENT, emit the line's indentation as a
        `(col, alt)` tuple (rendered later against a guessed stack), and at the end of the
        file no DEDENTs (their number is forced by the grammar: every INDENT is closed).
        """
        if end is None:
            end = len(text)
        if eof is None:
            eof = final
        table = self.table
        toks: list[str] = []
        starts: list[int] = []
        stack, depth, bol, col, alt, frozen, joined = layout
        i = pos
        tail = end
        while i < end:
            c = text[i]
            if joined and c != "\\":
                joined = False
            if c == "\n" or c == "\r":
                if depth == 0 and not bol:
                    toks.append(NEWLINE)
                    starts.append(i)
                    bol = True
                col = alt = 0
                frozen = False
                i += 2 if c == "\r" and i + 1 < end and text[i + 1] == "\n" else 1
                continue
            if c == " " or c == "\t" or c == "\f":
                if bol and not frozen:
                    # right_context.advance_ws, inlined: this loop runs for every character.
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
                if nl < 0:
                    if final:  # a comment at the end of the text ends there
                        i = end
                        break
                    tail = i
                    break
                i = nl
                continue
            if c == "\\":
                if i + 1 >= end:
                    if final:
                        raise LexError("unexpected end of file after line continuation", i)
                    tail = i
                    break
                nxt = text[i + 1]
                if nxt == "\n" or nxt == "\r":
                    i += 3 if nxt == "\r" and i + 2 < end and text[i + 2] == "\n" else 2
                    frozen = frozen or bol
                    joined = True
                    continue
                raise LexError("unexpected character after line continuation character", i)
            if c == "\0":
                raise LexError("source code cannot contain null bytes", i)
            found = table.longest(text, i, end)
            if found is None:
                if not final and table.is_prefix(text, i, end):
                    tail = i
                    break
                raise LexError(f"invalid token starting with {c!r}", i)
            name, e = found
            # A complete lexeme followed by white space is certain: no Python lexeme continues
            # a complete match with white space (strings end at their closing quote).
            if not final and (
                e == end or (text[e] not in _WS and table.is_prefix(text, i, e + 1))
            ) and table.is_prefix(text, i, end):
                tail = i
                break
            if name in _NUMBER_TERMINALS and e < end and _is_ident_char(text[e]):
                self._check_number_suffix(text, i, e, end, final)
            elif name == self.fstring:
                if not fstring_fields_valid(text[i:e]):
                    raise LexError("invalid expression in f-string", i)
            elif name in self.strings and not _string_valid(text, i, e):
                raise LexError("invalid string literal (escape or bytes content)", i)
            if bol and events:
                toks.append((col, alt))  # type: ignore[arg-type]
                starts.append(i)
                bol = frozen = False
            elif bol:
                frozen = False
                try:
                    pre, stack = indent_tokens(Layout(stack, depth, bol, col, alt))
                except LayoutError as err:
                    raise LexError(str(err), i) from None
                for t in pre:
                    toks.append(t)
                    starts.append(i)
                bol = False
            toks.append(name)
            starts.append(i)
            if name in self.openers:
                depth += 1
            elif name in self.closers:
                depth -= 1
                if depth < 0:
                    raise LexError(f"unmatched {text[i]!r}", i)
            i = e
        if eof:
            if joined:  # CPython: "unexpected EOF while parsing"
                raise LexError("end of file right after a line continuation", end)
            if depth > 0:
                raise LexError("unexpected end of file inside brackets", end)
            if not bol:
                toks.append(NEWLINE)
                starts.append(end)
                bol = True
            for _ in range(0 if events else len(stack) - 1):
                toks.append(DEDENT)
                starts.append(end)
            stack = stack[:1]
            col = alt = 0
        return Lexed(toks, starts, Layout(stack, depth, bol, col, alt, frozen, joined), tail)

    def _check_number_suffix(self, text: str, start: int, e: int, end: int, final: bool) -> None:
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
