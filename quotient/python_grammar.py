"""Seam's Python grammar and lexer, loaded once per process.

The grammar (`grammars/python.lark`) is extended with `MARKERS` spare terminals that no rule
uses: a FIM language appends one to each right-context branch's quotient start
(`START -> S_b MARK_b`), so the recognizer can tell, at the end of the middle, which branch's
layout guess was the true one. They are declared here, in the base grammar, because quotient
grammars may only add rules, not symbols.
"""

from __future__ import annotations

import functools
from importlib import resources

from lexer.lexemes import LexemeTable, TerminalSpec
from lexer.tokenizer import Tokenizer

from .grammar import Grammar

MARKERS = 1024
MARKER_PREFIX = "$B"
START = "file_input"


@functools.lru_cache(maxsize=1)
def python_grammar() -> Grammar:
    """The Python 3.12 grammar (start `file_input`) with the marker terminals."""
    text = resources.files("quotient").joinpath("grammars/python.lark").read_text("utf-8")
    g = Grammar.from_lark(text, start=START)
    markers = [f"{MARKER_PREFIX}{k}" for k in range(MARKERS)]
    return Grammar(g.rules, g.start, list(g.terminals) + markers,
                   terminal_defs=g.terminal_defs, ignored=g.ignored, declared=g.declared)


@functools.lru_cache(maxsize=1)
def python_tokenizer() -> Tokenizer:
    g = python_grammar()
    specs = [
        TerminalSpec(d.name, d.kind, d.pattern, frozenset(d.flags), d.priority)
        for d in g.terminal_defs.values()
        if d.name not in g.ignored and d.name not in g.declared
    ]
    return Tokenizer(LexemeTable(specs, fstring_terminal="FSTRING"))


def lex_python(text: str) -> list[str]:
    """Terminal names of a whole Python file (raises `lexer.tokenizer.LexError`)."""
    return python_tokenizer().lex(text).tokens
