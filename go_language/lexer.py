"""Go's lexer, incremental: lexemes as the Go scanner makes them, with semicolon insertion.

Go's layout rule is automatic semicolon insertion (the spec's "Semicolons"): a newline, or the
end of the file, after an identifier, a basic literal, ``break continue fallthrough return``
or ``++ -- ) ] }`` becomes a ``;`` token.  A general comment that contains a newline acts like
a newline, any other comment like a space.  So the whole layout state is one bit, ``ins``:
whether the last token lets a newline insert a semicolon (Python's lexer carries an indent
stack instead).

Incremental use follows the branching lexer of `lexer.tokenizer`: `lex` commits only lexemes
that no further text can change (the scanner decided them without looking at the end of the
text); the rest stays *pending*, the lexeme that may still continue.  With ``final=True`` the
text's end is the end of the file: the pending lexeme is closed (or is an error) and the
end-of-file semicolon is inserted.

Tokens are *kinds*: the keyword or operator text itself (``"func"``, ``"<-"``), or one of
`IDENT INT FLOAT IMAG RUNE STRING PATH` (raw and interpreted strings are both ``STRING``, or
``PATH`` when their value is a valid import path: go/parser checks import paths, so the grammar
needs the difference).  Errors
the Go scanner reports (an illegal character, a bad escape, a malformed number, an
unterminated literal or comment) raise `LexError`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

KEYWORDS = frozenset(
    "break case chan const continue default defer else fallthrough for func go goto if "
    "import interface map package range return select struct switch type var".split())
OPERATORS = frozenset(
    "+ & += &= && == != ( ) - | -= |= || < <= [ ] * ^ *= ^= <- > >= { } / << /= <<= ++ = := , "
    "; % >> %= >>= -- ! ... . : &^ &^= ~".split())
#: Every proper prefix of an operator (a pending operator may still grow into a longer one).
_OP_PREFIXES = frozenset(op[:k] for op in OPERATORS for k in range(1, len(op)))
LITERALS = ("IDENT", "INT", "FLOAT", "IMAG", "RUNE", "STRING", "PATH")
#: Tokens after which a newline (or the end of the file) inserts a semicolon.
SEMI_AFTER = frozenset(LITERALS) | {"break", "continue", "fallthrough", "return", "++", "--",
                                    ")", "]", "}"}
SEMI = ";"

_ESC = r"""\\(?:[abfnrtv\\]|[0-7]{3}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"""
_STRING = re.compile(rf'"(?:[^"\\\n]|{_ESC}|\\")*"')
_RUNE = re.compile(rf"'(?:[^'\\\n]|{_ESC}|\\')'")
#: What an unfinished interpreted string or rune may look like (a partial escape at the end).
_PARTIAL_ESC = r"(?:\\(?:[0-7]{0,2}|x[0-9a-fA-F]?|u[0-9a-fA-F]{0,3}|U[0-9a-fA-F]{0,7}))?"
_STRING_OPEN = re.compile(rf'"(?:[^"\\\n]|{_ESC}|\\")*{_PARTIAL_ESC}\Z')
_RUNE_OPEN = re.compile(rf"'(?:(?:[^'\\\n]|{_ESC}|\\')|{_PARTIAL_ESC})\Z")
#: Escapes left to right (an escaped backslash is one, so a ``u`` after it starts none); the
#: group is the value of those whose range must be checked.
_ESC_VALUE = re.compile(r"\\(?:([0-7]{3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})|.)", re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SPACE = re.compile(r"[ \t\r]+")
#: Characters Go refuses anywhere in a file (NUL, a byte-order mark past the start, text that
#: was not valid UTF-8 and was decoded to lone surrogates).
_ILLEGAL = re.compile("[\x00\ufeff\ud800-\udfff]")

_DEC = r"[0-9](?:_?[0-9])*"
_HEX = r"[0-9a-fA-F](?:_?[0-9a-fA-F])*"
_INT = re.compile(r"0|[1-9](?:_?[0-9])*|0[bB](?:_?[01])+|0[oO](?:_?[0-7])+|0(?:_?[0-7])+"
                  r"|0[xX](?:_?[0-9a-fA-F])+")
_EXP = rf"[eE][+-]?{_DEC}"
_FLOAT = re.compile(
    rf"{_DEC}\.(?:{_DEC})?(?:{_EXP})?|{_DEC}{_EXP}|\.{_DEC}(?:{_EXP})?"
    rf"|0[xX](?:_?{_HEX}\.(?:{_HEX})?|_?{_HEX}|\.{_HEX})[pP][+-]?{_DEC}")


class LexError(ValueError):
    """The text is not a sequence of Go lexemes (what the Go scanner reports as an error)."""


class _More(Exception):
    """The scanner needs text past the end to decide the current lexeme."""


@dataclass(frozen=True)
class Lexed:
    """Kinds of the certain tokens, where the pending text starts, and the layout bit after."""

    kinds: list[str]
    tail: int  # start of the pending lexeme (the text's end when nothing is pending)
    ins: bool  # whether a newline here would insert a semicolon


@dataclass(frozen=True)
class Lexeme:
    """One lexeme: its kind (None for space and comments), end, and whether it holds a
    newline (a newline itself, or a general comment across lines)."""

    kind: str | None
    end: int
    newline: bool


def scan(text: str, pos: int, final: bool) -> Lexeme | None:
    """The lexeme at `pos`, or None when text past the end could change it (not `final`)."""
    try:
        return _scan(text, pos, final)
    except _More:
        return None


def lex(text: str, start: int = 0, ins: bool = False, final: bool = False) -> Lexed:
    """The certain tokens of `text[start:]` after layout bit `ins` (raises `LexError`)."""
    kinds: list[str] = []
    pos, n = start, len(text)
    while pos < n:
        lx = scan(text, pos, final)
        if lx is None:
            return Lexed(kinds, pos, ins)
        kind = lx.kind
        if kind is None:
            if lx.newline and ins:
                kinds.append(SEMI)
                ins = False
        else:
            kinds.append(kind)
            ins = kind in SEMI_AFTER
        pos = lx.end
    if final and ins:
        kinds.append(SEMI)
        ins = False
    return Lexed(kinds, n, ins)


def nesting(kinds: list[str]) -> int:
    """How deep the brackets of a token list nest, opened or closed."""
    depth = deepest = 0
    for kind in kinds:
        if kind in ("(", "[", "{"):
            depth += 1
        elif kind in (")", "]", "}"):
            depth -= 1
        else:
            continue
        deepest = max(deepest, abs(depth))
    return deepest


def kind_after(kind: str | None, newline: bool, ins: bool) -> tuple[list[str], bool]:
    """The tokens one lexeme adds after layout bit `ins`, and the bit after it."""
    if kind is None:
        return ([SEMI], False) if newline and ins else ([], ins)
    return [kind], kind in SEMI_AFTER


def _scan(text: str, pos: int, final: bool) -> Lexeme:
    n = len(text)

    def peek(k: int) -> str:
        if k < n:
            return text[k]
        if final:
            return ""
        raise _More

    c = text[pos]
    if c == "\n":
        return Lexeme(None, pos + 1, True)
    if c in " \t\r":
        return Lexeme(None, _SPACE.match(text, pos).end(), False)  # type: ignore[union-attr]
    if c == "_" or c.isalpha():
        m = _IDENT.match(text, pos)
        end = m.end() if m else pos
        if end < n and (not text[end].isascii() or end == pos):
            end = _unicode_ident_end(text, end)
        peek(end)  # an identifier at the end of the text may go on
        word = text[pos:end]
        return Lexeme(word if word in KEYWORDS else "IDENT", end, False)
    if c.isdigit() and c.isascii() or (c == "." and peek(pos + 1).isdigit()
                                       and peek(pos + 1).isascii()):
        return _number(text, pos, peek)
    if c == '"':
        return _quoted(text, pos, final, _STRING, _STRING_OPEN, "STRING")
    if c == "'":
        return _quoted(text, pos, final, _RUNE, _RUNE_OPEN, "RUNE")
    if c == "`":
        end = text.find("`", pos + 1)
        if end < 0:
            if final:
                raise LexError("raw string literal not terminated")
            raise _More
        _check_chars(text, pos, end)
        return Lexeme(_string_kind(text[pos + 1:end].replace("\r", "")), end + 1, False)
    if c == "/" and peek(pos + 1) in ("/", "*"):
        return _comment(text, pos, final)
    if c in _OP_CHARS:
        end = pos + 1
        while text[pos:end] in _OP_PREFIXES and peek(end) and text[pos:end + 1] in _OP_OR_PREFIX:
            end += 1
        op = text[pos:end]
        if op not in OPERATORS:  # ".." is two periods
            op, end = ".", pos + 1
        return Lexeme(op, end, False)
    raise LexError(f"illegal character {c!r}")


_OP_CHARS = frozenset("".join(OPERATORS))
_OP_OR_PREFIX = OPERATORS | _OP_PREFIXES


def _unicode_ident_end(text: str, end: int) -> int:
    n = len(text)
    while end < n:
        ch = text[end]
        if ch == "_" or (ch.isascii() and ch.isalnum()):
            end += 1
        elif not ch.isascii() and (ch.isalpha() or unicodedata.category(ch) == "Nd"):
            end += 1
        else:
            break
    return end


def _check_chars(text: str, start: int, end: int) -> None:
    if _ILLEGAL.search(text, start, end):
        raise LexError("illegal character in the text")


def _quoted(text: str, pos: int, final: bool, whole: re.Pattern[str], opening: re.Pattern[str],
            kind: str) -> Lexeme:
    m = whole.match(text, pos)
    if m is not None:
        _check_chars(text, pos, m.end())
        for esc in _ESC_VALUE.finditer(text, pos, m.end()):
            if esc.group(1):
                _check_escape(esc.group(1))
        if kind == "STRING":
            kind = _string_kind(text[pos + 1:m.end() - 1])
        return Lexeme(kind, m.end(), False)
    if not final:
        line_end = text.find("\n", pos)
        if line_end < 0 and opening.match(text, pos):
            _check_chars(text, pos, len(text))
            raise _More
    raise LexError(f"malformed {kind.lower()} literal")


#: Characters go/parser refuses in an import path (besides spaces and non-graphic ones).
_PATH_ILLEGAL = frozenset('!"#$%&\'()*,:;<=>?[\\]^{|}`\ufffd')
_GRAPHIC = frozenset("LMNPS")


def _string_kind(body: str) -> str:
    """``PATH`` if the string's value is a valid import path (go/parser's rule), else
    ``STRING``.  A body with escapes is taken for a plain string (a subset: an escaped import
    path is refused, which gofmt would accept)."""
    if not body or "\\" in body:
        return "STRING"
    for ch in body:
        if ch in _PATH_ILLEGAL or ch.isspace():
            return "STRING"
        if not ch.isascii() and unicodedata.category(ch)[0] not in _GRAPHIC \
                and unicodedata.category(ch) != "Zs":
            return "STRING"
        if ch.isascii() and not ch.isprintable():
            return "STRING"
    return "PATH"


def _check_escape(body: str) -> None:
    value = int(body, 8) if body[0] not in "uU" else int(body[1:], 16)
    if body[0] not in "uU" and value > 255:
        raise LexError("octal escape value > 255")
    if body[0] in "uU" and (value > 0x10FFFF or 0xD800 <= value < 0xE000):
        raise LexError("escape sequence is invalid Unicode code point")


def _comment(text: str, pos: int, final: bool) -> Lexeme:
    if text[pos + 1] == "/":
        end = text.find("\n", pos)
        if end < 0:
            if not final:
                raise _More
            end = len(text)
        _check_chars(text, pos, end)
        return Lexeme(None, end, False)
    end = text.find("*/", pos + 2)
    if end < 0:
        if final:
            raise LexError("comment not terminated")
        _check_chars(text, pos, len(text))
        raise _More
    _check_chars(text, pos, end)
    return Lexeme(None, end + 2, "\n" in text[pos:end])


def _number(text: str, pos: int, peek) -> Lexeme:  # type: ignore[no-untyped-def]
    """A number's extent as the Go scanner takes it, then its validity by the spec."""
    k, base = pos, 10
    if text[k] != ".":
        if text[k] == "0":
            k += 1
            c = peek(k).lower()
            if c in ("x", "o", "b"):
                k += 1
                base = {"x": 16, "o": 8, "b": 2}[c]
        k = _digits(text, k, base, peek)
    if peek(k) == ".":
        k = _digits(text, k + 1, base, peek)
    if peek(k).lower() in ("e", "p"):
        k += 1
        if peek(k) in ("+", "-"):
            k += 1
        k = _digits(text, k, 10, peek)
    if peek(k) == "i":
        k += 1
    word = text[pos:k]
    imag = word.endswith("i")
    body = word[:-1] if imag else word
    if _FLOAT.fullmatch(body):
        return Lexeme("IMAG" if imag else "FLOAT", k, False)
    if _INT.fullmatch(body) or (imag and re.fullmatch(_DEC, body)):
        return Lexeme("IMAG" if imag else "INT", k, False)
    raise LexError(f"malformed number {word!r}")


def _digits(text: str, k: int, base: int, peek) -> int:  # type: ignore[no-untyped-def]
    ok = "0123456789abcdefABCDEF_" if base == 16 else "0123456789_"
    while (c := peek(k)) and c in ok:
        k += 1
    return k
