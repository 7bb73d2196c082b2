"""Tests for the reference Earley recognizer (strings and NFAs) against brute force."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotient import Grammar, Nfa
from quotient.earley import recognizer
from quotient.nfa_charts import parse_nfa
from tests.support.quotient_families import (
    FAMILIES,
    alphabet,
    derives,
    nfa_words,
    random_grammars,
    recognizes,
    words,
)

NAMES = sorted(FAMILIES)


@pytest.mark.parametrize("name", NAMES)
def test_membership_exhaustive_short_words(name):
    g = FAMILIES[name]
    for w in words(alphabet(g), 4):
        assert recognizes(g, w) == derives(g, w), w


@pytest.mark.parametrize("name", NAMES)
def test_prefix_states_and_allowed_terminals(name):
    """A None state has no continuation of length <= 2 (bounded check),
    and allowed_terminals lists exactly the terminals whose scan is not None."""
    g = FAMILIES[name]
    alpha = alphabet(g)
    root = recognizer(g)
    for u in words(alpha, 3):
        state = root.scan_many(u)
        if state is None:
            assert not any(derives(g, u + v) for v in words(alpha, 2)), u
            continue
        allowed = state.allowed_terminals()
        for a in alpha:
            assert (state.scan(a) is not None) == (a in allowed)
        assert state.is_complete() == derives(g, u)


def _find_completion(state, limit: int = 12):
    """Breadth-first search over allowed terminals for a word that completes `state`."""
    frontier = [(state, [])]
    seen = {state}
    for _ in range(limit + 1):
        nxt = []
        for st_, v in frontier:
            if st_.is_complete():
                return v
            for a in sorted(st_.allowed_terminals()):
                s2 = st_.scan(a)
                if s2 is not None and s2 not in seen:
                    seen.add(s2)
                    nxt.append((s2, v + [a]))
        frontier = nxt
    return None


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_viability(name, data):
    g = FAMILIES[name]
    alpha = alphabet(g)
    u = data.draw(st.lists(st.sampled_from(alpha), max_size=7))
    state = recognizer(g).scan_many(u)
    if state is None:
        # Never rejects a prefix that has a (short) completion.
        assert not any(derives(g, u + v) for v in words(alpha, 2))
    else:
        v = _find_completion(state)
        assert v is not None, u
        assert derives(g, u + v), (u, v)


def test_persistent_states_share_charts():
    g = FAMILIES["expr"]
    root = recognizer(g).scan_many(["x", "+"])
    store = root.store
    before = len(store.keys)
    snapshot = set(store.keys[root.index])
    results = [root.scan(a) for a in ["x", "(", "x", "+", "*", ")"] * 9]
    assert all(r is None or r.store is store for r in results)
    # One new chart per distinct accepted terminal, memoised for repeats.
    assert len(store.keys) == before + 2
    assert store.keys[root.index] == snapshot
    assert root.scan("x") == results[0]
    assert root.scan("x").scan_many(["*", "x"]).is_complete()
    assert root.is_complete() is False


def test_unknown_terminal_raises_keyerror_with_name():
    st_ = recognizer(FAMILIES["expr"])
    with pytest.raises(KeyError, match="nosuch"):
        st_.scan("nosuch")
    with pytest.raises(KeyError, match="E"):
        st_.scan("E")  # a nonterminal is not scannable
    with pytest.raises(KeyError, match="zz"):
        st_.scan_many(["x", "zz"])
    with pytest.raises(KeyError, match="qq"):
        parse_nfa(FAMILIES["expr"], Nfa.from_symbols(["x", "qq"]))


def test_empty_rules_left_recursion_and_cycles():
    g = Grammar([("S", ("S",)), ("S", ("S", "a")), ("S", ()), ("S", ("A", "S", "b")),
                 ("A", ())], "S")
    for w in words(["a", "b"], 5):
        assert recognizes(g, w) == derives(g, w), w


def _nfas(alpha):
    word = st.lists(st.sampled_from(alpha), max_size=3).map(Nfa.from_symbols)
    return st.recursive(
        word,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: Nfa.union(*p)),
            st.tuples(inner, inner).map(lambda p: p[0].concat(p[1])),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 1)).map(
                lambda p: p[0].repeat(p[1], p[1] + p[2])),
        ),
        max_leaves=4,
    )


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_nfa_parse_accepts_iff_some_word_in_language(name, data):
    g = FAMILIES[name]
    alpha = alphabet(g)
    x = data.draw(_nfas(alpha))
    # Bounded-length NFAs only (no unbounded repeat), so brute force is exhaustive.
    ws = nfa_words(x, 9)
    assert parse_nfa(g, x).accepts() == any(derives(g, w) for w in ws)


@pytest.mark.parametrize("name", ["expr", "dyck", "cyclic"])
def test_nfa_parse_with_loops(name):
    g = FAMILIES[name]
    alpha = alphabet(g)
    for a in alpha:
        for b in alpha:
            loop = Nfa.from_symbols([a]).repeat(0, None).concat(Nfa.from_symbols([b]))
            expect = any(derives(g, [a] * k + [b]) for k in range(7))
            if expect:
                assert parse_nfa(g, loop).accepts()
            # Languages here are "eventually periodic" enough that 7 repetitions decide it.
            else:
                assert not parse_nfa(g, loop).accepts()


@settings(max_examples=150, deadline=None)
@given(g=random_grammars())
def test_random_grammars_membership_and_prefixes(g):
    root = recognizer(g)
    for w in words(["a", "b"], 4):
        st_ = root.scan_many(w)
        assert (st_ is not None and st_.is_complete()) == derives(g, w), w
        if st_ is None:
            assert not any(derives(g, w + v) for v in words(["a", "b"], 2)), w
