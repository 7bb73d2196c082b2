"""go_language.lexer: semicolon insertion, literals, comments, and the incremental contract
(a certain lexeme is never changed by more text), with gofmt as the judge of literals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from go_language.grammar import parses
from go_language.lexer import LexError, lex, scan
from tests.go_language._gofmt import gofmt_accepts, needs_gofmt


def kinds(text: str) -> list[str]:
    return lex(text, final=True).kinds


@pytest.mark.parametrize(("text", "want"), [
    ("x\n", ["IDENT", ";"]),
    ("x", ["IDENT", ";"]),  # the end of the file inserts one too
    ("f(\n", ["IDENT", "("]),
    ("a +\nb", ["IDENT", "+", "IDENT", ";"]),
    ("return\n", ["return", ";"]),
    ("break\ncontinue\nfallthrough\n", ["break", ";", "continue", ";", "fallthrough", ";"]),
    ("x++\ny--\n", ["IDENT", "++", ";", "IDENT", "--", ";"]),
    (")\n]\n}\n", [")", ";", "]", ";", "}", ";"]),
    ("{\n", ["{"]),
    ("1\n2.5\n3i\n'a'\n\"s\"\n`r`\n",
     ["INT", ";", "FLOAT", ";", "IMAG", ";", "RUNE", ";", "PATH", ";", "PATH", ";"]),
    # An import path is a string of its own kind (go/parser checks import paths).
    ('"a/b.c" "" "a b" "a:b" "a\\x41" `a\tb` "é"', ["PATH", "STRING", "STRING", "STRING",
                                                    "STRING", "STRING", "PATH", ";"]),
    ("x // c\ny", ["IDENT", ";", "IDENT", ";"]),
    ("x /* a\n b */ y", ["IDENT", ";", "IDENT", ";"]),  # a comment across lines: a newline
    ("x /* a */ y", ["IDENT", "IDENT", ";"]),  # on one line: a space
    ("x\n\n\n", ["IDENT", ";"]),
    ("a &^= b &^ c", ["IDENT", "&^=", "IDENT", "&^", "IDENT", ";"]),
    ("f(xs...)", ["IDENT", "(", "IDENT", "...", ")", ";"]),
    ("x..y", ["IDENT", ".", ".", "IDENT", ";"]),
    ("<-ch", ["<-", "IDENT", ";"]),
    ("a<<=b>>=c", ["IDENT", "<<=", "IDENT", ">>=", "IDENT", ";"]),
    ("~int|string", ["~", "IDENT", "|", "IDENT", ";"]),
    ("func typ if iff", ["func", "IDENT", "if", "IDENT", ";"]),
    ("héllo αβ_1", ["IDENT", "IDENT", ";"]),
    ("`a\nb\r\nc`", ["STRING", ";"]),
    ('"\\\\ud800" "\\\\\\u00e9"', ["STRING", "STRING", ";"]),  # an escaped backslash, then text
    (".5 1. 0x1p-2 1e3 0b1 0o7 07 1_000 0x_f 0i 08.5 089i",
     ["FLOAT", "FLOAT", "FLOAT", "FLOAT", "INT", "INT", "INT", "INT", "INT", "IMAG", "FLOAT",
      "IMAG", ";"]),
])
def test_tokens_and_semicolons(text: str, want: list[str]) -> None:
    assert kinds(text) == want


@pytest.mark.parametrize("text", [
    "08", "1__0", "1_", "0x", "0b2", "1e", "1p3", "0x1.8", "0o8", "09",
    "'ab'", "''", "'\n'", "'\\q'", "\"a\nb\"", "\"\\400\"", "\"\\uD800\"", "\"\\U00110000\"",
    "\"\\'\"", "'\\\"'", "\"abc", "`abc", "/* x", "a\x00b", "a\ufeffb", "#", "$", "x\u00a0y",
])
def test_scanner_errors(text: str) -> None:
    with pytest.raises(LexError):
        kinds(text)


def test_pending_lexeme_waits_for_more_text() -> None:
    assert lex("x := foo").tail == 5  # `foo` may go on
    assert lex("x := foo ").tail == 9
    assert lex("a <").tail == 2  # `<` may become `<-`, `<=`, `<<`, `<<=`
    assert lex('s := "ab').tail == 5
    assert lex("x // note").tail == 2
    assert lex("x /* a\nb").kinds == ["IDENT"]  # the comment's newline is not decided yet
    done = lex("x /* a\nb */")
    assert done.kinds == ["IDENT", ";"] and not done.ins  # closed: it acts as a newline


FRAGMENTS = st.sampled_from([
    "x", "y1", " ", "\n", "\t", "(", ")", "{", "}", "[", "]", ";", ",", ".", "..", "...", ":",
    "=", ":=", "+", "++", "-", "<", "<-", "&", "^", "&^", "|", "*", "/", "//", "/*", "*/",
    "0", "1", "0x", "e", "p", "_", "i", "'", "\"", "`", "\\", "return", "func", "a\n",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS, max_size=14), st.data())
def test_certain_tokens_never_change(parts: list[str], data: st.DataObject) -> None:
    """Lexing a prefix commits only tokens that the whole text lexes to as well, and the rest
    lexes on from the pending lexeme with the same layout bit."""
    text = "".join(parts)
    k = data.draw(st.integers(0, len(text)))
    try:
        whole = lex(text, final=True).kinds
    except LexError:
        whole = None
    try:
        head = lex(text[:k])
    except LexError:
        assert whole is None  # an error in a prefix is an error of every continuation
        return
    if whole is None:
        return
    assert whole[: len(head.kinds)] == head.kinds
    rest = lex(text, head.tail, head.ins, final=True).kinds
    assert head.kinds + rest == whole


@settings(max_examples=200, deadline=None)
@given(st.lists(FRAGMENTS, min_size=1, max_size=10), st.data())
def test_a_decided_lexeme_is_final(parts: list[str], data: st.DataObject) -> None:
    text = "".join(parts)
    k = data.draw(st.integers(1, len(text)))
    try:
        early = scan(text[:k], 0, False)
    except LexError:
        return
    if early is not None and (early.kind is not None or early.newline):
        assert scan(text, 0, True) == early  # (a run of spaces may split: no token changes)


NUMBER = st.text("0123456789xXbBoOeEpP._+-i", min_size=1, max_size=7)
QUOTED = st.builds(lambda q, body, q2: q + body + q2, st.sampled_from(["'", '"', "`"]),
                   st.text("ab\\'\"xuU0179nt \n", max_size=6), st.sampled_from(["'", '"', "`"]))


@needs_gofmt
@settings(max_examples=250, deadline=None)
@given(st.one_of(NUMBER, QUOTED))
def test_literals_as_gofmt_reads_them(literal: str) -> None:
    text = f"package p\n\nvar _ = {literal}\n"
    assert parses(text) == gofmt_accepts(text), literal
