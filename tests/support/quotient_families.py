"""Small grammar families and brute-force oracles for the quotient engine's tests.

The oracle `derives` decides membership without Earley: it saturates the set of derivable
spans ``(A, i, j)`` of one word by plain fixpoint iteration, which handles empty rules, left
recursion and cycles by construction. The families cover the shapes the issue lists.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from hypothesis import strategies as st

from quotient import Grammar, Nfa, earley


def recognizes(g: Grammar, word: Sequence[str]) -> bool:
    """Whether the reference recognizer (`quotient.earley`) accepts `word` as a sentence."""
    state = earley.recognizer(g).scan_many(word)
    return state is not None and state.is_complete()


def nfa_accepts(nfa: Nfa, word: Sequence[str]) -> bool:
    """Whether `nfa` accepts `word`, by direct simulation of its state sets."""
    cur = nfa.epsilon_closure([nfa.start])
    for sym in word:
        cur = nfa.epsilon_closure(d for s in cur for t, d in nfa.edges[s] if t == sym)
        if not cur:
            return False
    return bool(cur & nfa.finals)


def _g(rules: str, start: str) -> Grammar:
    """Grammar from lines ``A -> x y | z``; ``ε`` or nothing for the empty right side."""
    out = []
    for line in rules.strip().splitlines():
        lhs, alts = line.split("->")
        for alt in alts.split("|"):
            out.append((lhs.strip(), tuple(s for s in alt.split() if s != "ε")))
    return Grammar(out, start)


FAMILIES: dict[str, Grammar] = {
    # Precedence climbing, left-recursive.
    "expr": _g(
        """
        E -> E + T | T
        T -> T * F | F
        F -> ( E ) | x
        """,
        "E",
    ),
    # Dyck words over two bracket kinds.
    "dyck": _g("S -> ε | ( S ) S | [ S ] S", "S"),
    # Left- and right-recursive comma lists.
    "lists": _g(
        """
        S -> l L | r R
        L -> L , x | x
        R -> x , R | x
        """,
        "S",
    ),
    # Nullable everywhere, including nullable chains in the middle of rules.
    "nullable": _g(
        """
        S -> A B A c | B
        A -> ε | a A | B
        B -> ε | b | A A b
        """,
        "S",
    ),
    # Ambiguous (and cyclic through S -> S S with S nullable).
    "ambiguous": _g(
        """
        S -> S S | a | ε
        E -> E + E | E * E | x
        T -> S d E
        """,
        "T",
    ),
    # Unreachable (Z) and unproductive (U, and the rule that uses it) parts.
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
    # Unit cycles A -> B -> A and a self loop.
    "cyclic": _g(
        """
        S -> A | S a
        A -> B | b | A
        B -> A | c B | ε
        """,
        "S",
    ),
}


def alphabet(g: Grammar) -> list[str]:
    """The terminals of `g`, sorted."""
    return sorted(g.terminals)


def derives(g: Grammar, word: Sequence[str], start: str | None = None) -> bool:
    """Brute-force membership: does `start` (default: g's start) derive `word`?"""
    n = len(word)
    rules = g.rules
    spans: dict[str, set[tuple[int, int]]] = {}
    term = g.terminals

    def ends(sym: str, i: int) -> set[int]:
        if sym in term:
            return {i + 1} if i < n and word[i] == sym else set()
        return {j for (a, j) in spans.get(sym, ()) if a == i}

    changed = True
    while changed:
        changed = False
        for lhs, rhs in rules:
            for i in range(n + 1):
                cur = {i}
                for sym in rhs:
                    cur = {k for j in cur for k in ends(sym, j)}
                    if not cur:
                        break
                known = spans.setdefault(lhs, set())
                for j in cur:
                    if (i, j) not in known:
                        known.add((i, j))
                        changed = True
    return (0, n) in spans.get(start or g.start, set())


def words(alpha: Sequence[str], max_len: int) -> Iterator[list[str]]:
    """All words over `alpha` of length 0..max_len."""
    for n in range(max_len + 1):
        for w in itertools.product(alpha, repeat=n):
            yield list(w)


def nfa_words(nfa: Nfa, max_len: int) -> list[list[str]]:
    """The words of `nfa` up to `max_len`, by walking the automaton's subsets."""
    out: list[list[str]] = []
    frontier = [(frozenset(nfa.epsilon_closure([nfa.start])), [])]
    for depth in range(max_len + 1):
        nxt = []
        for states, w in frontier:
            if states & nfa.finals:
                out.append(w)
            if depth == max_len:
                continue
            by_sym: dict[str, set[int]] = {}
            for s in states:
                for sym, d in nfa.edges[s]:
                    by_sym.setdefault(sym, set()).add(d)
            for sym in sorted(by_sym):
                nxt.append((frozenset(nfa.epsilon_closure(by_sym[sym])), w + [sym]))
        frontier = nxt
    return out


def with_start(g: Grammar, start: str) -> Grammar:
    """`g` with another start symbol (sharing its encoding)."""
    return g.with_rules([], start=start)


@st.composite
def random_grammars(draw):
    """Small random grammars: any mix of empty rules, cycles, left/right recursion and
    unproductive or unreachable nonterminals."""
    nts = ["S", "A", "B", "C"][: draw(st.integers(1, 4))]
    syms = nts + ["a", "b"]
    rules = draw(st.lists(
        st.tuples(st.sampled_from(nts), st.lists(st.sampled_from(syms), max_size=3)),
        min_size=1, max_size=8,
    ))
    rules = [(lhs, tuple(rhs)) for lhs, rhs in rules]
    defined = {lhs for lhs, _ in rules}
    # A nonterminal used but never defined gets only a self loop: defined, unproductive.
    rules += [(n, (n,)) for n in nts if n not in defined]
    return Grammar(rules, "S", terminals=["a", "b"])
