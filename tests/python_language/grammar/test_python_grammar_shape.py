"""Whole-grammar properties: nothing unproductive or unused, and real files parse whole."""

from __future__ import annotations

import random
import sysconfig
import tokenize
from pathlib import Path

import pytest

from tests.python_language.grammar._harness import (
    accepts,
    lexers,
    local_ast_accepts,
    python_grammar,
)


def test_every_rule_is_productive_and_reachable() -> None:
    # Earley's prefix property needs productive nonterminals; pruning must not change anything.
    g = python_grammar()
    pruned = g.pruned()
    assert len(pruned.rules) == len(g.rules)
    assert pruned.nonterminals == g.nonterminals


def test_every_terminal_but_the_ignored_ones_is_used() -> None:
    g = python_grammar()
    used = {sym for _, rhs in g.rules for sym in rhs}
    assert set(g.terminals) - used == set(g.ignored)


def _stdlib_sample(count: int, seed: int) -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py"))
    if len(files) < count:
        pytest.skip("standard library sources not found")
    return random.Random(seed).sample(files, count)


@pytest.mark.parametrize("lexer_name", sorted(lexers()))
def test_standard_library_modules_parse_whole(lexer_name: str) -> None:
    lex = lexers()[lexer_name]
    checked = 0
    for path in _stdlib_sample(12, seed=1):
        with tokenize.open(path) as f:
            source = f.read()
        if not local_ast_accepts(source):
            continue
        checked += 1
        assert accepts(source, lex), path.name
    assert checked >= 10
