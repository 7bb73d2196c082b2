"""Seam's Go grammar and the map from the lexer's token kinds to its terminals, loaded once.

The grammar (`go.lark`, next to this module) is extended with `MARKERS` spare terminals that no
rule uses: the FIM language appends one to each right-context branch's quotient start
(``START -> S_b MARK_b``), so that at the end of the middle the recognizer can tell which
branch (where R's first lexeme starts, and the semicolon-insertion bit there) was the true one.
They are declared here because quotient grammars may only add rules, not symbols.
"""

from __future__ import annotations

import functools
from importlib import resources

from quotient import Grammar, GrammarError, RecognizerState, recognizer, transfer

from .lexer import KEYWORDS, LITERALS, OPERATORS, lex

MARKERS = 256
MARKER_PREFIX = "$B"
START = "source_file"


def grammar_text() -> str:
    """The text of `go.lark`."""
    return resources.files("go_language").joinpath("go.lark").read_text("utf-8")


@functools.lru_cache(maxsize=1)
def go_grammar() -> Grammar:
    """The Go grammar (start `source_file`) with the marker terminals."""
    g = Grammar.from_lark(grammar_text(), start=START)
    markers = [f"{MARKER_PREFIX}{k}" for k in range(MARKERS)]
    return Grammar(g.rules, g.start, sorted(g.terminals) + markers,
                   terminal_defs=g.terminal_defs, ignored=g.ignored, declared=g.declared)


@functools.lru_cache(maxsize=1)
def terminal_of() -> dict[str, str]:
    """The grammar terminal of every token kind the lexer makes."""
    g = go_grammar()
    by_text = {d.pattern: d.name for d in g.terminal_defs.values() if d.kind == "str"}
    out = {k: k for k in LITERALS}
    for word in KEYWORDS | OPERATORS:
        name = by_text.get(word)
        if name is None:
            raise GrammarError(f"go.lark never uses the token {word!r}")
        out[word] = name
    return out


def terminals(kinds: list[str]) -> list[str]:
    """The grammar terminals of lexer token kinds."""
    table = terminal_of()
    return [table[k] for k in kinds]


@functools.lru_cache(maxsize=1)
def go_recognizer() -> RecognizerState:
    """The recognizer of whole Go files, before any token."""
    return recognizer(go_grammar())


def parses(text: str) -> bool:
    """Whether `text` is a Go file Seam's grammar accepts (lexer errors included)."""
    from .lexer import LexError

    try:
        kinds = lex(text, final=True).kinds
    except LexError:
        return False
    state = go_recognizer().scan_many(terminals(kinds))
    return state is not None and state.is_complete()


# Built languages travel between processes with the grammar named, not copied
# (``quotient.transfer``).
transfer.register("go.grammar", go_grammar)
transfer.register("go.recognizer", go_recognizer)
