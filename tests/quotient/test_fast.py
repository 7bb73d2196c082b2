"""Differential tests: the fast recognizer (quotient/fast.py) against the reference Earley
recognizer (quotient/earley.py) on small grammar families and on random grammars.

At every position of every word both must agree on: rejection (``scan`` returning None),
``is_complete`` and ``allowed_terminals``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotient import Grammar, GrammarError, earley, fast, left_quotient, lr0, right_quotient
from tests.support.quotient_families import _g

FAMILIES: dict[str, Grammar] = {
    "expr": _g(
        """
        E -> E + T | T
        T -> T * F | F
        F -> ( E ) | x | - F
        """,
        "E",
    ),
    "dyck": _g("S -> ε | ( S ) S | [ S ] S", "S"),
    "lists": _g(
        """
        S -> l L | r R | n N
        L -> L , x | x
        R -> x , R | x
        N -> N x | ε
        """,
        "S",
    ),
    "nullable": _g(
        """
        S -> A B A c | B | C C C d
        A -> ε | a A | B
        B -> ε | b | A A b
        C -> D | ε
        D -> C | e
        """,
        "S",
    ),
    "ambiguous": _g(
        """
        T -> S d E
        S -> S S | a | ε
        E -> E + E | E * E | x
        """,
        "T",
    ),
    "cyclic": _g(
        """
        S -> A | S a
        A -> B | b | A
        B -> A | c B | ε
        """,
        "S",
    ),
    "useless": Grammar(
        [
            ("S", ("a", "S", "b")),
            ("S", ("c",)),
            ("S", ("U", "a")),
            ("U", ("U", "x")),
            ("Z", ("z",)),
            ("Z", ("S",)),
        ],
        "S",
        terminals=["a", "b", "c", "x", "z"],
    ),
    "empty_language": Grammar([("S", ("S", "a"))], "S", terminals=["a"]),
}


def assert_agree(g: Grammar, word: list[str]) -> None:
    """Run both recognizers along `word`, comparing everything at every position."""
    ref = earley.recognizer(g)
    got = fast.recognizer(g)
    for i, term in enumerate(word):
        assert got.is_complete() == ref.is_complete(), (word[:i], "is_complete")
        assert got.allowed_terminals() == ref.allowed_terminals(), (word[:i], "allowed")
        ref = ref.scan(term)
        got = got.scan(term)
        assert (got is None) == (ref is None), (word[: i + 1], "rejection")
        if ref is None:
            return
    assert got.is_complete() == ref.is_complete(), (word, "is_complete")
    assert got.allowed_terminals() == ref.allowed_terminals(), (word, "allowed")


def sentence(g: Grammar, choices: list[int], max_steps: int = 60) -> list[str]:
    """A word of `g` (or a prefix-ish fragment when the budget runs out) chosen by `choices`:
    leftmost derivation, each nonterminal expanded by rule ``choices[k] % n``."""
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for lhs, rhs in g.rules:
        by_lhs.setdefault(lhs, []).append(rhs)
    out: list[str] = []
    stack = [g.start]
    k = 0
    while stack and k < max_steps:
        sym = stack.pop()
        if sym in g.terminals:
            out.append(sym)
            continue
        alts = by_lhs.get(sym)
        if not alts:
            continue
        rhs = alts[choices[k % len(choices)] % len(alts)] if choices else alts[0]
        k += 1
        stack.extend(reversed(rhs))
    return out


@pytest.mark.parametrize("name", sorted(FAMILIES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_families_random_words(name: str, data: st.DataObject) -> None:
    g = FAMILIES[name]
    alpha = sorted(g.terminals)
    word = data.draw(st.lists(st.sampled_from(alpha), max_size=10))
    assert_agree(g, word)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(choices=st.lists(st.integers(0, 7), min_size=1, max_size=30), data=st.data())
def test_families_derived_words_and_corruptions(
    name: str, choices: list[int], data: st.DataObject
) -> None:
    g = FAMILIES[name]
    word = sentence(g, choices)
    assert_agree(g, word)
    if word:
        # One edit (replace, delete or insert a terminal) somewhere in a long word.
        alpha = sorted(g.terminals)
        pos = data.draw(st.integers(0, len(word) - 1))
        edit = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        sym = data.draw(st.sampled_from(alpha))
        if edit == "replace":
            word = word[:pos] + [sym] + word[pos + 1 :]
        elif edit == "delete":
            word = word[:pos] + word[pos + 1 :]
        else:
            word = word[:pos] + [sym] + word[pos:]
        assert_agree(g, word)


# -- random grammars -----------------------------------------------------------------------

NTS = ["S", "A", "B", "C"]
TS = ["a", "b"]


@st.composite
def grammars(draw: st.DrawFn) -> Grammar:
    """Small random grammars: empty rules, unit cycles, left/right recursion, useless symbols
    all occur."""
    rules = []
    for lhs in NTS:
        for _ in range(draw(st.integers(0, 3))):
            rhs = draw(st.lists(st.sampled_from(NTS + TS), max_size=3))
            rules.append((lhs, tuple(rhs)))
    # A nonterminal without rules would be undefined; a lone self-loop makes it unproductive.
    rules += [(n, (n,)) for n in NTS if not any(lhs == n for lhs, _ in rules)]
    return Grammar(rules, "S", terminals=TS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=grammars(), word=st.lists(st.sampled_from(TS), max_size=8))
def test_random_grammars(g: Grammar, word: list[str]) -> None:
    assert_agree(g, word)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    g=grammars(),
    extra=st.lists(
        st.tuples(
            st.sampled_from(["X", "Y"]),
            st.lists(st.sampled_from(NTS + TS + ["X", "Y"]), max_size=3).map(tuple),
        ),
        max_size=5,
    ),
    word=st.lists(st.sampled_from(TS), max_size=8),
)
def test_random_extensions(g: Grammar, extra: list, word: list[str]) -> None:
    """Extensions (new nonterminals over the base's) agree with the reference, and using
    them leaves the shared base tables answering as before."""
    base_before = fast.recognizer(g).scan_many(word)
    extra = [*extra, ("X", ("X", "Y")), ("Y", ("Y",))]  # X and Y always defined
    ext = g.with_rules(extra, start="X")
    assert_agree(ext, word)
    assert_agree(g.with_rules(extra, start="A"), word)
    base_after = fast.recognizer(g).scan_many(word)
    assert (base_before is None) == (base_after is None)
    if base_before is not None:
        assert base_before.is_complete() == base_after.is_complete()
        assert base_before.allowed_terminals() == base_after.allowed_terminals()


# -- persistence, memoisation, errors, table sharing ---------------------------------------


def test_states_are_persistent_and_memoised() -> None:
    g = FAMILIES["expr"]
    s = fast.recognizer(g).scan_many(["(", "x", "+", "x"])
    assert s is not None
    allowed = s.allowed_terminals()
    assert allowed == {")", "+", "*"}
    assert not s.is_complete()
    branches = {t: s.scan(t) for t in sorted(g.terminals)}
    assert {t for t, b in branches.items() if b is not None} == allowed
    # Scanning from `s` changed nothing about `s`.
    assert s.allowed_terminals() == allowed and not s.is_complete()
    # Memoised: the same question gives the same state object.
    assert s.scan(")") == branches[")"]
    closed = branches[")"]
    assert closed.is_complete()
    assert closed.scan_many(["*", "x"]).is_complete()
    assert s.scan_many(["*", "x", ")"]).is_complete()


def test_branching_adds_one_chart_per_accepted_terminal() -> None:
    """Scanning many terminals from one state shares its charts: each distinct accepted
    terminal adds one chart row to the shared store, repeats add nothing, and the state's
    own chart is left as it was."""
    g = FAMILIES["expr"]
    s = fast.recognizer(g).scan_many(["x", "+"])
    charts = s._charts
    before = len(charts.kern)
    own = charts.kern[s._index]
    results = [s.scan(a) for a in ["x", "(", "x", "+", "*", ")", "-"] * 9]
    accepted = {r for r in results if r is not None}
    assert len(accepted) == 3  # x, ( and -
    assert all(r._charts is charts for r in accepted)
    assert len(charts.kern) == before + 3
    assert charts.kern[s._index] == own


def test_unknown_terminal_raises_key_error_naming_it() -> None:
    s = fast.recognizer(FAMILIES["expr"])
    with pytest.raises(KeyError, match="NOPE"):
        s.scan("NOPE")
    with pytest.raises(KeyError, match="E"):
        s.scan("E")  # a nonterminal is not a terminal
    with pytest.raises(KeyError, match="NOPE"):
        s.scan_many(["x", "NOPE"])


def test_terminal_used_by_no_rule_is_rejected_not_unknown() -> None:
    g = FAMILIES["useless"]
    assert fast.recognizer(g).scan("z") is None  # only unreachable rules use z
    assert fast.recognizer(g).scan("x") is None  # only unproductive rules use x
    assert fast.recognizer(g).scan("c").is_complete()


def test_extension_shares_base_tables() -> None:
    g = FAMILIES["expr"]
    base = lr0.automaton(g)
    assert lr0.automaton(g) is base
    ext = g.with_rules([("Q", ("E", ")")), ("Q", ("Q", ")"))], start="Q")
    auto = lr0.automaton(ext)
    assert auto.base is base
    s = fast.recognizer(ext).scan_many(["x", "+", "x", ")", ")"])
    assert s is not None and s.is_complete()
    assert fast.recognizer(ext).scan_many(["x", ")", "+"]) is None
    before = base.stats()["kernel_states"]
    # DFA states made only of base items are interned in the base automaton.
    fast.recognizer(ext).scan_many(["(", "x", "*", "x", ")", ")"])
    assert base.stats()["kernel_states"] > before or before > 0


def test_extension_cannot_redefine_base_nonterminal() -> None:
    g = FAMILIES["expr"]
    with pytest.raises(GrammarError, match="'E'"):
        g.with_encoded_rules([], [(g.symbol_ids["E"], ())], g.start_id)


def test_extension_automaton_needs_its_base_automaton() -> None:
    g = FAMILIES["expr"]
    ext = g.with_rules([("Q", ("E", ")"))], start="Q")
    with pytest.raises(ValueError, match="base"):
        lr0.Automaton(ext.analysis)  # no base automaton
    other = FAMILIES["dyck"]
    with pytest.raises(ValueError, match="base"):
        lr0.Automaton(ext.analysis, lr0.automaton(other))


def test_start_without_rules_is_the_empty_language() -> None:
    ext = FAMILIES["expr"].with_rules([], start="Nothing")
    s = fast.recognizer(ext)
    assert not s.is_complete()
    assert s.allowed_terminals() == frozenset()
    assert s.scan("x") is None


@pytest.mark.parametrize("name", ["expr", "dyck", "lists", "nullable", "ambiguous", "cyclic"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_quotient_grammars(name: str, data: st.DataObject) -> None:
    """Quotient grammars (the base plus derived rules, built with with_rules) are what the
    recognizer mostly runs on in Seam: both recognizers must agree on them too."""
    g = FAMILIES[name]
    alpha = sorted(g.terminals)
    w = data.draw(st.lists(st.sampled_from(alpha), max_size=4))
    q = left_quotient(g, w) if data.draw(st.booleans()) else right_quotient(g, w)
    assert_agree(q, data.draw(st.lists(st.sampled_from(alpha), max_size=8)))


def test_deep_nesting_has_no_recursion_limit() -> None:
    """Completions cascade through thousands of open brackets iteratively."""
    g = FAMILIES["expr"]
    depth = 5000
    s = fast.recognizer(g).scan_many(["("] * depth + ["x"] + [")"] * (depth - 1))
    assert s is not None and not s.is_complete()
    assert s.allowed_terminals() == {")", "+", "*"}
    assert s.scan(")").is_complete()
    assert s.scan_many([")", ")"]) is None
