"""The grammar gives every accepted construct program exactly one derivation.

Seam's recognizer does not need unique derivations, but each ambiguity costs chart items, so
the grammar is written to be unambiguous. Seam's engine does not count derivations; lark's
Earley parser with ``ambiguity="explicit"`` marks every ambiguous span with an ``_ambig`` node,
so it serves as the detector here (checked first on a grammar known to be ambiguous).
"""

from __future__ import annotations

import tokenize
from functools import lru_cache

import lark
import pytest
from lark.lexer import Lexer
from lark.lexer import Token as LarkToken

from tests.python_language.grammar._harness import GRAMMAR_PATH, lexers
from tests.python_language.grammar.constructs import CONSTRUCTS, NEEDS_SEAM_LEXER

pytestmark = pytest.mark.slow


class _TerminalStream(Lexer):
    """Lexer for lark that passes through an already lexed list of terminal names."""

    def __init__(self, conf: object) -> None:
        pass

    def lex(self, data: list[str]):  # type: ignore[override]
        for name in data:
            yield LarkToken(name, name)


def _explicit_parser(text: str, start: str) -> lark.Lark:
    return lark.Lark(text, start=start, parser="earley", lexer=_TerminalStream,
                     ambiguity="explicit")


@lru_cache(maxsize=1)
def _python_parser() -> lark.Lark:
    return _explicit_parser(GRAMMAR_PATH.read_text(encoding="utf-8"), "file_input")


def _ambiguous_rules(parser: lark.Lark, terminals: list[str]) -> set[str]:
    tree = parser.parse(terminals)
    return {str(child.data) for amb in tree.find_data("_ambig") for child in amb.children}


def test_detector_sees_an_ambiguity() -> None:
    # "x + x + x" splits two ways under the first grammar, one way under the second.
    ambiguous = 'start: e\ne: e "+" e | "x"\n'
    assert _ambiguous_rules(_explicit_parser(ambiguous, "start"), ["X", "PLUS"] * 2 + ["X"])
    fixed = 'start: e\ne: e "+" "x" | "x"\n'
    assert not _ambiguous_rules(_explicit_parser(fixed, "start"), ["X", "PLUS"] * 2 + ["X"])


@pytest.mark.parametrize("construct", sorted(CONSTRUCTS))
def test_construct_programs_are_unambiguous(construct: str) -> None:
    lex = lexers()["seam" if construct in NEEDS_SEAM_LEXER else "tokenize"]
    for source in CONSTRUCTS[construct][0]:
        try:
            terminals = lex(source)
        except (SyntaxError, tokenize.TokenError):
            continue
        assert not _ambiguous_rules(_python_parser(), terminals), source
