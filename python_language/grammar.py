"""Seam's Python grammar and the tokenizer made from its terminals, loaded once per process.

The grammar (`python.lark`, next to this module) is extended with `MARKERS` spare terminals
that no rule uses: a FIM language appends one to each right-context branch's quotient start
(``START -> S_b MARK_b``), so the recognizer can tell, at the end of the middle, which branch's
layout guess was the true one. They are declared here, in the base grammar, because quotient
grammars may only add rules, not symbols.

Both are made under one lock: the vLLM server builds languages on worker threads, and two
threads loading the grammar at once would import lark's modules concurrently (a circular
import then fails half-initialised) and make two grammars, each with its own automaton.
"""

from __future__ import annotations

import functools
import threading
from importlib import resources

from lexer.layout import LayoutTerminals
from lexer.lexemes import LexemeTable, TerminalSpec
from lexer.tokenizer import Tokenizer
from quotient import Grammar, GrammarError, transfer

MARKERS = 1024
MARKER_PREFIX = "$B"
START = "file_input"
#: The f-string terminal, scanned by the lexer's own f-string scanner (PEP 701 nests them).
FSTRING = "FSTRING"


def grammar_text() -> str:
    """The text of `python.lark`."""
    return resources.files("python_language").joinpath("python.lark").read_text("utf-8")


#: Held while the grammar or the tokenizer is made (the tokenizer asks for the grammar).
_LOADING = threading.RLock()


def python_grammar() -> Grammar:
    """The Python 3.12 grammar (start `file_input`) with the marker terminals."""
    with _LOADING:
        return _python_grammar()


def python_tokenizer() -> Tokenizer:
    """The tokenizer of `python_grammar`'s terminals (layout terminals made by the lexer)."""
    with _LOADING:
        return _python_tokenizer()


@functools.lru_cache(maxsize=1)
def _python_grammar() -> Grammar:
    g = Grammar.from_lark(grammar_text(), start=START)
    missing = set(LayoutTerminals()) - g.declared
    if missing:
        raise GrammarError(f"python.lark must %declare the layout terminals {sorted(missing)}")
    markers = [f"{MARKER_PREFIX}{k}" for k in range(MARKERS)]
    return Grammar(g.rules, g.start, sorted(g.terminals) + markers,
                   terminal_defs=g.terminal_defs, ignored=g.ignored, declared=g.declared)


@functools.lru_cache(maxsize=1)
def _python_tokenizer() -> Tokenizer:
    g = _python_grammar()
    specs = [
        TerminalSpec(d.name, d.kind, d.pattern, frozenset(d.flags), d.priority)
        for d in g.terminal_defs.values()
        if d.name not in g.ignored and d.name not in g.declared
    ]
    return Tokenizer(LexemeTable(specs, fstring_terminal=FSTRING), LayoutTerminals())


def lex_python(text: str) -> list[str]:
    """Terminal names of a whole Python file (raises `lexer.tokenizer.LexError`)."""
    return python_tokenizer().lex(text).terminals


# Built languages travel between processes with the grammar and the tokenizer named, not
# copied (``quotient.transfer``; the vLLM server builds its rows' languages in worker processes).
transfer.register("python.grammar", python_grammar)
transfer.register("python.tokenizer", python_tokenizer)
