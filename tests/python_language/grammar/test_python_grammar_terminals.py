"""The grammar's terminal definitions: the lexer contract's names, and regexes that match what
CPython's tokenizer reads as one token, usable with the `regex` module's partial matching."""

from __future__ import annotations

import io
import re
import tokenize

import pytest
import regex

from tests.python_language.grammar._harness import python_grammar

NUMBER_TERMINALS = ("DEC_NUMBER", "HEX_NUMBER", "OCT_NUMBER", "BIN_NUMBER", "FLOAT_NUMBER",
                    "IMAG_NUMBER")
STRING_TERMINALS = ("STRING", "LONG_STRING", "BYTES", "LONG_BYTES")

# Lexeme -> the one number terminal that must match it whole (None: no number terminal may).
NUMBERS = {
    "0": "DEC_NUMBER", "00": "DEC_NUMBER", "0_0": "DEC_NUMBER", "7": "DEC_NUMBER",
    "1_000_000": "DEC_NUMBER", "10": "DEC_NUMBER",
    "0x_ff": "HEX_NUMBER", "0XdeadBEEF": "HEX_NUMBER", "0x1_2": "HEX_NUMBER",
    "0o17": "OCT_NUMBER", "0O_7": "OCT_NUMBER",
    "0b1010": "BIN_NUMBER", "0B_1_0": "BIN_NUMBER",
    "1.": "FLOAT_NUMBER", ".5": "FLOAT_NUMBER", "1.5": "FLOAT_NUMBER", "1e3": "FLOAT_NUMBER",
    "1E-3": "FLOAT_NUMBER", "1e+3": "FLOAT_NUMBER", "1_0.0_1e1_0": "FLOAT_NUMBER",
    "007.5": "FLOAT_NUMBER", "00e1": "FLOAT_NUMBER", "1.e5": "FLOAT_NUMBER",
    "1j": "IMAG_NUMBER", "1.5J": "IMAG_NUMBER", "1e3j": "IMAG_NUMBER", "0j": "IMAG_NUMBER",
    ".5j": "IMAG_NUMBER", "5.j": "IMAG_NUMBER", "09j": "IMAG_NUMBER", "1_0j": "IMAG_NUMBER",
    "01": None, "1__0": None, "1_": None, "0x": None, "0x_": None, "0b2": None, "0o8": None,
    "1e": None, "1e_1": None, "1._5": None, "1_.5": None, "1.2.3": None, "j": None, "1jj": None,
    "_1": None, "0_7": None, "1e1_": None, ".": None, "1 0": None,
}

# Lexeme -> the one string terminal that must match it whole (None: none may).
STRINGS = {
    "''": "STRING", '""': "STRING", "'a'": "STRING", '"a\\"b"': "STRING", "'\\\\'": "STRING",
    "r'\\''": "STRING", "b'x'": "BYTES", "Rb'x'": "BYTES", "bR'x'": "BYTES",
    "u'x'": "STRING", "U'x'": "STRING", "'a\\\nb'": "STRING", "'a\\\r\nb'": "STRING",
    "''''''": "LONG_STRING", '""""""': "LONG_STRING", "'''a\nb'''": "LONG_STRING",
    "'''it's'''": "LONG_STRING", "'''a''b'''": "LONG_STRING", "'''a\\''''": "LONG_STRING",
    '"""a"b""c"""': "LONG_STRING", "rb'''x'''": "LONG_BYTES", "'''\\''''": "LONG_STRING",
    "'a": None, "'a\nb'": None, "'a''": None, "ur'x'": None, "bu'x'": None, "f'x'": None,
    "rf'x'": None, "'''a''''": None, "'''a'''b'''": None, "'''a": None, "x'a'": None,
    "'''a''": None, "'\\'": None,
}


def _defs() -> dict[str, tuple[str, str]]:
    return {n: (d.kind, d.pattern) for n, d in python_grammar().terminal_defs.items()}


def _compiled(name: str) -> regex.Pattern[str]:
    kind, pattern = _defs()[name]
    assert kind == "re"
    return regex.compile(pattern)


def test_start_symbol_and_declared_terminals() -> None:
    g = python_grammar()
    assert g.start == "file_input"
    assert {"NEWLINE", "INDENT", "DEDENT", "FSTRING"} <= set(g.declared)
    assert {"COMMENT", "WHITESPACE", "LINE_CONTINUATION"} <= set(g.ignored)
    assert {"NAME", *NUMBER_TERMINALS, *STRING_TERMINALS, "FSTRING"} <= set(g.terminals)


def test_keywords_and_soft_keywords_are_literal_terminals() -> None:
    literals = {d.pattern for d in python_grammar().terminal_defs.values() if d.kind == "str"}
    import keyword

    for word in keyword.kwlist:
        assert word in literals, word
    for word in ("match", "case", "type", "_"):
        assert word in literals, word


def test_regexes_have_no_lookaround_or_lazy_quantifier() -> None:
    lookaround = re.compile(r"\(\?<?[=!]")
    lazy = re.compile(r"[*+?}]\?")
    for name, (kind, pattern) in _defs().items():
        if kind != "re":
            continue
        assert not lookaround.search(pattern), name
        # A "?" after a quantifier makes it lazy; "(?" opens a group and is not preceded by one.
        assert not lazy.search(pattern.replace("(?:", "(")), name
        regex.compile(pattern)


@pytest.mark.parametrize("text, expected", NUMBERS.items(), ids=list(NUMBERS))
def test_number_terminals(text: str, expected: str | None) -> None:
    matching = [n for n in NUMBER_TERMINALS if _compiled(n).fullmatch(text)]
    assert matching == ([expected] if expected else [])


@pytest.mark.parametrize("text, expected", STRINGS.items(), ids=list(STRINGS))
def test_string_terminals(text: str, expected: str | None) -> None:
    matching = [n for n in STRING_TERMINALS if _compiled(n).fullmatch(text)]
    assert matching == ([expected] if expected else [])


def _single_token(text: str) -> tokenize.TokenInfo | None:
    try:
        toks = [
            t for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)
        ]
    except (tokenize.TokenError, SyntaxError):
        return None
    return toks[0] if len(toks) == 1 and toks[0].string == text else None


@pytest.mark.parametrize("text", [t for t in {**NUMBERS, **STRINGS} if "\r" not in t])
def test_tables_agree_with_cpython_tokenizer(text: str) -> None:
    # Keeps the tables honest: a lexeme listed as valid is one NUMBER/STRING token for CPython.
    expected = NUMBERS.get(text, STRINGS.get(text))
    tok = _single_token(text)
    is_one = tok is not None and tok.type in (tokenize.NUMBER, tokenize.STRING)
    if text.lower().startswith(("f", "rf")):
        is_one = False  # f-strings are the lexer's FSTRING, not a STRING terminal
    assert is_one == (expected is not None)


@pytest.mark.parametrize("name, text", [
    ("HEX_NUMBER", "0x1f"), ("FLOAT_NUMBER", "1_0.5e-1_0"), ("IMAG_NUMBER", "1.5e3j"),
    ("BYTES", "rb'a\\'b'"), ("LONG_STRING", "'''a''b\\'''c'''"), ("NAME", "été_1"),
])
def test_every_prefix_is_a_partial_match(name: str, text: str) -> None:
    pattern = _compiled(name)
    assert pattern.fullmatch(text)
    for cut in range(len(text)):
        assert pattern.fullmatch(text[:cut], partial=True), text[:cut]


@pytest.mark.parametrize("text, ok", [("x", True), ("_", True), ("été", True), ("ℕ1", True),
                                      ("_1a", True), ("1a", False), ("a-b", False), ("", False),
                                      ("x²", False), ("℘", True), ("x·y", True), ("፩", False),
                                      ("x፩", True), ("a\u0301", True)])
def test_name_terminal(text: str, ok: bool) -> None:
    assert bool(_compiled("NAME").fullmatch(text)) == ok
    assert text.isidentifier() == ok
