"""Each construct of Python 3.12 is accepted by Seam's grammar, and its near misses rejected.

Programs come from `constructs.py`. For every program the grammar's verdict (through
`quotient.recognizer(Grammar.from_lark(...))`) must equal the table's, and so must CPython's
parser (3.12 in a subprocess when installed; else the running interpreter where its verdict is
the same as 3.12's). Terminal streams come from the tokenize adapter and, when it exists, from
Seam's own lexer.
"""

from __future__ import annotations

import sys
import tokenize

import pytest

from tests.python_language.grammar._harness import (
    accepts,
    lexers,
    local_ast_accepts,
    python312_verdicts,
)
from tests.python_language.grammar.constructs import (
    CONSTRUCTS,
    KNOWN_SEAM_LEXER_GAPS,
    NEEDS_SEAM_LEXER,
)

CASES = [
    pytest.param(construct, source, expected, id=f"{construct}-{'ok' if expected else 'bad'}{i}")
    for construct, (good, bad) in CONSTRUCTS.items()
    for expected, sources in ((True, good), (False, bad))
    for i, source in enumerate(sources)
]

LEXERS = lexers()


@pytest.fixture(scope="module")
def oracle() -> dict[str, bool] | None:
    sources = [p.values[1] for p in CASES]
    return python312_verdicts(sources)


def _oracle_verdict(oracle: dict[str, bool] | None, source: str, expected: bool) -> bool | None:
    if oracle is not None:
        return oracle[source]
    local = local_ast_accepts(source)
    # Without 3.12, a program the older local parser rejects may still be valid 3.12: no verdict.
    if sys.version_info < (3, 12) and not local and expected:
        return None
    return local


def test_table_is_not_trivial() -> None:
    goods = sum(len(g) for g, _ in CONSTRUCTS.values())
    bads = sum(len(b) for _, b in CONSTRUCTS.values())
    assert goods > 200 and bads > 150
    assert all(g and b for g, b in CONSTRUCTS.values()), "every construct needs both kinds"


@pytest.mark.parametrize("construct, source, expected", CASES)
def test_cpython_agrees_with_table(
    oracle: dict[str, bool] | None, construct: str, source: str, expected: bool
) -> None:
    verdict = _oracle_verdict(oracle, source, expected)
    if verdict is None:
        pytest.skip("needs python3.12 as the oracle")
    assert verdict == expected, f"CPython {'accepts' if verdict else 'rejects'} {source!r}"


@pytest.mark.parametrize("lexer_name", sorted(LEXERS))
@pytest.mark.parametrize("construct, source, expected", CASES)
def test_grammar_verdict(lexer_name: str, construct: str, source: str, expected: bool) -> None:
    if construct in NEEDS_SEAM_LEXER and lexer_name != "seam":
        pytest.skip("syntax newer than this interpreter's tokenize")
    try:
        got = accepts(source, LEXERS[lexer_name])
    except (SyntaxError, tokenize.TokenError) as exc:
        # A lexical error is a correct rejection; an accepted program must lex.
        if expected and lexer_name == "seam" and source in KNOWN_SEAM_LEXER_GAPS:
            pytest.xfail(f"known lexer gap: {KNOWN_SEAM_LEXER_GAPS[source]}")
        assert not expected, f"{lexer_name} could not lex {source!r}: {exc}"
        return
    assert got == expected, f"grammar {'accepts' if got else 'rejects'} {source!r}"


@pytest.mark.parametrize("source", [
    "x = 'a' b'c'\n", "x = b'a' 'c'\n", "x = b'a' f'c'\n", "x = rb'a' '''c'''\n",
    "x = b'a' u'c'\n",
])
def test_bytes_and_text_concatenation_is_rejected(source: str) -> None:
    # CPython's parser rejects mixing bytes and non-bytes literals.
    assert not local_ast_accepts(source)
    assert not accepts(source, LEXERS["tokenize"])


@pytest.mark.parametrize("source", [
    "x = b'a' B'c' rb'''d''' Br\"e\"\n", "x = 'a' f'b' '''c'''\n",
])
def test_bytes_with_bytes_and_text_with_text_are_accepted(source: str) -> None:
    assert local_ast_accepts(source)
    assert accepts(source, LEXERS["tokenize"])
