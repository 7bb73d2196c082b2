"""Unit tests for quotient.nfa: builders and combinators against their set semantics."""

import pytest

from quotient import Nfa
from tests.support.quotient_families import nfa_accepts, words

ALPHA = ["a", "b"]


def lang(nfa: Nfa, n: int = 5) -> set[tuple[str, ...]]:
    return {tuple(w) for w in words(ALPHA, n) if nfa_accepts(nfa, w)}


def test_from_symbols_and_trivial():
    assert lang(Nfa.from_symbols(["a", "b"])) == {("a", "b")}
    assert lang(Nfa.from_symbols([])) == {()}
    assert lang(Nfa.empty()) == set()
    assert lang(Nfa.epsilon()) == {()}


def test_union_concat():
    a, b = Nfa.from_symbols(["a"]), Nfa.from_symbols(["b", "b"])
    assert lang(Nfa.union(a, b)) == {("a",), ("b", "b")}
    assert lang(Nfa.union(a, b, Nfa.epsilon())) == {("a",), ("b", "b"), ()}
    assert lang(a.union(b)) == {("a",), ("b", "b")}
    assert lang(a.concat(b)) == {("a", "b", "b")}
    # Operands are not modified.
    assert lang(a) == {("a",)}


def test_repeat_bounded_and_unbounded():
    ab = Nfa.union(Nfa.from_symbols(["a"]), Nfa.from_symbols(["b"]))
    assert lang(ab.repeat(2, 3)) == {w for w in map(tuple, words(ALPHA, 3)) if 2 <= len(w)}
    a = Nfa.from_symbols(["a"])
    assert lang(a.repeat(0, None)) == {("a",) * k for k in range(6)}
    assert lang(a.repeat(2, None)) == {("a",) * k for k in range(2, 6)}
    assert lang(a.repeat(0, 0)) == {()}
    with pytest.raises(ValueError):
        a.repeat(3, 1)


def test_reversed_keeps_state_numbers():
    x = Nfa.union(Nfa.from_symbols(["a", "b"]), Nfa.from_symbols(["b", "b", "a"]))
    r = x.reversed()
    assert lang(r) == {w[::-1] for w in lang(x)}
    assert r.finals == {x.start}
    assert r.n_states == x.n_states + 1  # two finals: one fresh start state
    single = Nfa.from_symbols(["a", "b"])
    rs = single.reversed()
    assert rs.start == 2 and rs.finals == {0} and lang(rs) == {("b", "a")}


def test_builders():
    n = Nfa()
    s1 = n.add_state()
    s2 = n.add_state(final=True)
    n.add_edge(0, "a", s1)
    n.add_epsilon(s1, s2)
    n.add_edge(s2, "b", s2)
    assert lang(n) == {("a",) + ("b",) * k for k in range(5)}
    with pytest.raises(ValueError):
        n.add_edge(0, "a", 99)
