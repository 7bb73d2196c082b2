"""Cross-checks against a literal reading of the paper's Fig. 2.

`parse_nfa_provenance` is a naive Earley-over-NFA run that records every creation of every
item. These tests check that (1) the indexed `parse_nfa` builds the same end charts and a
subset elsewhere (it skips predictions that cannot advance), and
(2) walking the recorded creations backwards from the end charts, as Fig. 2 does, yields
exactly the derived rules that `quotients._extract` reads off the prediction index.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotient import Nfa
from quotient.keys import MASK, SHIFT
from quotient.nfa_charts import parse_nfa
from quotient.quotients import _Derived, _extract
from tests.support.provenance_oracle import parse_nfa_provenance
from tests.support.quotient_families import FAMILIES, alphabet

NAMES = sorted(FAMILIES)


def _nfas(alpha):
    word = st.lists(st.sampled_from(alpha), max_size=3).map(Nfa.from_symbols)
    return st.recursive(
        word,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda p: Nfa.union(*p)),
            st.tuples(inner, inner).map(lambda p: p[0].concat(p[1])),
            st.tuples(inner, st.integers(0, 1), st.sampled_from([1, None])).map(
                lambda p: p[0].repeat(p[1], None if p[2] is None else p[1] + p[2])),
        ),
        max_leaves=4,
    )


def fig2_rules(pc, end_charts) -> set[tuple[str, tuple[str, ...]]]:
    """Quotient rules by following creation methods backwards from the end charts."""
    t = pc.analysis
    names = t.symbol_names

    def tail(key: int, skip: int) -> tuple[str, ...]:
        item = key & MASK
        rid = t.item_rule[item]
        return tuple(names[s] for s in t.rule_table[rid][1][item - t.rule_first[rid] + skip:])

    def dname(key: int) -> str:
        return f"{names[t.item_lhs[key & MASK]]}!{key >> SHIFT}"

    rules = set()
    stack = []
    for q in end_charts:
        for key in pc.chart(q):
            rules.add((dname(key), tail(key, 0)))
            stack.append((q, key))
    seen = set(stack)
    while stack:
        q, key = stack.pop()
        for how in pc.created[(q, key)]:
            if how[0] == "scan":
                nxt = (how[1], how[2])
            elif how[0] == "complete":
                nxt = (how[3] >> SHIFT, how[1])  # the waiting item, in the chart B started
            elif how[0] == "predict":
                pred = how[1]
                rules.add((dname(pred), (dname(key), *tail(pred, 1))))
                nxt = (q, pred)
            else:  # "init": a top-level nonterminal, nothing further back
                continue
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return rules


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_indexed_charts_within_naive_charts(name, data):
    """The indexed parse builds a subset of the naive charts (its lookahead filter drops
    predictions that cannot advance), equal on end charts."""
    g = FAMILIES[name].productive_part()
    x = data.draw(_nfas(alphabet(g)))
    fast, naive = parse_nfa(g, x), parse_nfa_provenance(g, x)
    ends = {q for qs in fast.finals_of.values() for q in qs}
    for q in range(x.n_states):
        mine, full = fast.keys[q] or set(), naive.chart(q)
        assert mine <= full, q
        if q in ends:
            assert mine == full, q


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_extraction_equals_fig2_walk(name, data):
    g = FAMILIES[name].productive_part()
    x = data.draw(_nfas(alphabet(g)))
    ends = sorted({q for qs in parse_nfa(g, x).finals_of.values() for q in qs})
    out = _Derived(len(g.symbol_names))
    _extract(parse_nfa(g, x), ends, "", "!", out)
    all_names = g.symbol_names + out.names
    ours = {(all_names[lhs], tuple(all_names[s] for s in rhs)) for lhs, rhs in out.rules}
    assert ours == fig2_rules(parse_nfa_provenance(g, x), ends)


def test_provenance_records_duplicates():
    """An item predicted by two different items keeps both creations."""
    g = FAMILIES["expr"]
    pc = parse_nfa_provenance(g, Nfa.from_symbols(["("]))
    t = g.analysis
    # In chart 1 (after "("), each T item started there is predicted both by E -> . T and by
    # the left-recursive T -> . T * F; both creations are kept.
    f_items = [k for k in pc.chart(1) if g.symbol_names[t.item_lhs[k & MASK]] == "T"
               and (k >> SHIFT) == 1 and (k & MASK) == t.rule_first[t.item_rule[k & MASK]]]
    assert f_items
    for k in f_items:
        preds = [h for h in pc.created[(1, k)] if h[0] == "predict"]
        assert len(preds) == 2
