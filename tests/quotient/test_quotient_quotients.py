"""Property tests: left/right quotients and right_quotient_split against brute force.

For every grammar family and random terminal words: ``u ∈ L(right_quotient(g, w)) ⟺
u·w ∈ L(g)``, the mirror image for left quotients, the union over NFA-valued ``w``, the
per-final quotients of `right_quotient_split`, and Earley's prefix property on the results.
Membership in a quotient is checked twice: with the reference recognizer and with the
brute-force span oracle applied to the quotient grammar itself.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotient import (
    Grammar,
    Nfa,
    earley,
    left_quotient,
    recognizer,
    right_quotient,
    right_quotient_split,
)
from tests.support.quotient_families import (
    FAMILIES,
    alphabet,
    derives,
    nfa_words,
    random_grammars,
    recognizes,
    with_start,
    words,
)

NAMES = sorted(FAMILIES)
U_LEN = 4


def _word(alpha, max_size):
    return st.lists(st.sampled_from(alpha), max_size=max_size)


def _check_member(q: Grammar, u, expected: bool, start: str | None = None):
    grammar = q if start is None else with_start(q, start)
    assert recognizes(grammar, u) == expected, u
    assert derives(grammar, u) == expected, u
    # The fast recognizer, which Seam runs, must agree on quotient grammars too.
    st_ = recognizer(grammar).scan_many(u)
    assert (st_ is not None and st_.is_complete()) == expected, u


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_right_quotient_by_word(name, data):
    g = FAMILIES[name]
    alpha = alphabet(g)
    w = data.draw(_word(alpha, 3))
    q = right_quotient(g, w)
    for u in words(alpha, 3):
        _check_member(q, u, derives(g, u + w))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_left_quotient_by_word(name, data):
    g = FAMILIES[name]
    alpha = alphabet(g)
    w = data.draw(_word(alpha, 3))
    q = left_quotient(g, w)
    for u in words(alpha, 3):
        _check_member(q, u, derives(g, w + u))


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_quotients_random_pairs(name, data):
    g = FAMILIES[name]
    alpha = alphabet(g)
    w = data.draw(_word(alpha, 4))
    u = data.draw(_word(alpha, 5))
    _check_member(right_quotient(g, w), u, derives(g, u + w))
    _check_member(left_quotient(g, w), u, derives(g, w + u))


def _nfas(alpha):
    word = _word(alpha, 2).map(Nfa.from_symbols)
    return st.recursive(
        word,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: Nfa.union(*p)),
            st.tuples(inner, inner).map(lambda p: p[0].concat(p[1])),
            st.tuples(inner, st.integers(0, 1), st.integers(0, 1)).map(
                lambda p: p[0].repeat(p[1], p[1] + p[2])),
        ),
        max_leaves=3,
    )


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_quotients_by_nfa(name, data):
    g = FAMILIES[name]
    alpha = alphabet(g)
    x = data.draw(_nfas(alpha))
    ws = nfa_words(x, 8)  # the strategy bounds words of x to 8 symbols: exhaustive
    rq, lq = right_quotient(g, x), left_quotient(g, x)
    for u in words(alpha, 2):
        _check_member(rq, u, any(derives(g, u + w) for w in ws))
        _check_member(lq, u, any(derives(g, w + u) for w in ws))


@pytest.mark.parametrize("name", ["expr", "dyck", "lists", "cyclic"])
def test_quotients_by_looping_nfa(name):
    """Unbounded repetition: every short witness must be accepted by the quotient."""
    g = FAMILIES[name]
    alpha = alphabet(g)
    for a in alpha:
        x = Nfa.from_symbols([a]).repeat(1, None)
        rq, lq = right_quotient(g, x), left_quotient(g, x)
        for u in words(alpha, 3):
            witnessed_r = any(derives(g, u + [a] * k) for k in range(1, 5))
            witnessed_l = any(derives(g, [a] * k + u) for k in range(1, 5))
            if witnessed_r:
                assert recognizes(rq, u), (a, u)
            if witnessed_l:
                assert recognizes(lq, u), (a, u)
            # The other direction, bounded: an accepted u has a witness (found by search).
            if recognizes(rq, u):
                assert any(derives(g, u + [a] * k) for k in range(1, 9)), (a, u)
            if recognizes(lq, u):
                assert any(derives(g, [a] * k + u) for k in range(1, 9)), (a, u)


def _words_to(nfa: Nfa, final: int, max_len: int):
    one = nfa.copy()
    one.finals = {final}
    return nfa_words(one, max_len)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_right_quotient_split(name, data):
    g = FAMILIES[name]
    alpha = alphabet(g)
    common = data.draw(_word(alpha, 2))
    branches = data.draw(st.lists(_word(alpha, 2), min_size=1, max_size=3))
    # Reversed suffixes: the end of the right context first, then branches near its start.
    rev = Nfa.from_symbols(common[::-1]).concat(
        Nfa.union(*(Nfa.from_symbols(b[::-1]) for b in branches)))
    q, starts = right_quotient_split(g, rev)
    assert set(starts) == rev.finals
    for f, start in starts.items():
        suffixes = [w[::-1] for w in _words_to(rev, f, 8)]
        for u in words(alpha, 3):
            expected = any(derives(g, u + w) for w in suffixes)
            if start is None:
                assert not expected, (f, u)
            else:
                _check_member(q, u, expected, start)
    # The grammar's own start derives the union of all branches.
    for u in words(alpha, 2):
        expected = any(derives(g, u + w[::-1]) for w in nfa_words(rev, 8))
        assert recognizes(q, u) == expected, u


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_prefix_property_on_quotients(name, data):
    """A quotient state that is not None always has a completion, and scan never rejects a
    prefix that has one (bounded search)."""
    g = FAMILIES[name]
    alpha = alphabet(g)
    w = data.draw(_word(alpha, 3))
    u = data.draw(_word(alpha, 5))
    q = right_quotient(g, w)
    state = earley.recognizer(q).scan_many(u)
    if state is None:
        assert not any(derives(g, u + v + w) for v in words(alpha, 2))
        return
    if not u and not state.is_complete() and not state.allowed_terminals():
        # The root state of an empty quotient language is the one state without completion.
        assert not any(derives(g, v + w) for v in words(alpha, 3))
        return
    frontier, seen, found = [(state, [])], {state}, None
    for _ in range(12):
        done = [v for s, v in frontier if s.is_complete()]
        if done:
            found = done[0]
            break
        nxt = []
        for s, v in frontier:
            for a in sorted(s.allowed_terminals()):
                s2 = s.scan(a)
                if s2 not in seen:
                    seen.add(s2)
                    nxt.append((s2, v + [a]))
        frontier = nxt
    assert found is not None, (w, u)
    assert derives(g, u + found + w), (w, u, found)


def test_quotient_grammar_extends_productive_base():
    g = FAMILIES["useless"]
    q = right_quotient(g, ["b"])
    assert q.base is g.productive_part()
    assert not any("U" == lhs for lhs, _ in q.rules[q.n_base_rules:])
    assert recognizes(q, ["a", "c"]) and not recognizes(q, ["c"])


def test_empty_quotients():
    g = FAMILIES["expr"]
    q = right_quotient(g, ["(", "("])  # nothing ends in "( ("
    assert not recognizes(q, []) and not recognizes(q, ["x"])
    assert earley.recognizer(q).scan("x") is None
    rev = Nfa.union(Nfa.from_symbols(["("]), Nfa.from_symbols([")"]))
    _, starts = right_quotient_split(g, rev)
    assert sorted(v is None for v in starts.values()) == [False, True]


def test_unknown_terminal_in_quotient_input():
    g = FAMILIES["expr"]
    with pytest.raises(KeyError, match="nope"):
        right_quotient(g, ["x", "nope"])
    with pytest.raises(KeyError, match="nope"):
        left_quotient(g, Nfa.from_symbols(["nope"]))


@pytest.mark.parametrize("name", ["dyck", "lists", "nullable", "cyclic"])
def test_right_quotient_split_with_loop_at_start(name):
    """The shape the Python FIM language builds: a self-loop at the start of the reversed
    automaton (closing tokens of any count at the end of the file), then a trie of branches."""
    g = FAMILIES[name]
    alpha = alphabet(g)
    loop_sym = alpha[-1]
    rev = Nfa(1, 0, [])
    rev.add_edge(0, loop_sym, 0)
    branches = [[alpha[0]], [alpha[0], alpha[-1]], []]
    finals = []
    for b in branches:
        node = 0
        for sym in b:
            nxt = rev.add_state()
            rev.add_edge(node, sym, nxt)
            node = nxt
        rev.finals.add(node)
        finals.append(node)
    q, starts = right_quotient_split(g, rev)
    for b, f in zip(branches, finals, strict=True):
        name_f = starts[f]
        for u in words(alpha, 3):
            def suffix(k, b=b):
                return b[::-1] + [loop_sym] * k
            witnessed = any(derives(g, u + suffix(k)) for k in range(4))
            accepted = name_f is not None and recognizes(with_start(q, name_f), u)
            if witnessed:
                assert accepted, (b, u)
            if accepted:
                assert any(derives(g, u + suffix(k)) for k in range(9)), (b, u)


@settings(max_examples=150, deadline=None)
@given(g=random_grammars(), data=st.data())
def test_quotients_of_random_grammars(g, data):
    w = data.draw(_word(["a", "b"], 3))
    rq, lq = right_quotient(g, w), left_quotient(g, w)
    for u in words(["a", "b"], 3):
        _check_member(rq, u, derives(g, u + w))
        _check_member(lq, u, derives(g, w + u))


@settings(max_examples=100, deadline=None)
@given(g=random_grammars(), data=st.data())
def test_split_of_random_grammars(g, data):
    branches = data.draw(st.lists(_word(["a", "b"], 2), min_size=1, max_size=3))
    rev = Nfa.union(*(Nfa.from_symbols(b[::-1]) for b in branches))
    q, starts = right_quotient_split(g, rev)
    for f, start in starts.items():
        suffixes = [w[::-1] for w in _words_to(rev, f, 4)]
        for u in words(["a", "b"], 3):
            expected = any(derives(g, u + w) for w in suffixes)
            if start is None:
                assert not expected
            else:
                _check_member(q, u, expected, start)
