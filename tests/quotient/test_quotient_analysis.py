"""GrammarAnalysis: the one place both recognizers learn what is nullable, usable and first."""

from __future__ import annotations

from hypothesis import given, settings

from quotient import Grammar
from tests.support.quotient_families import FAMILIES, derives, random_grammars, words


def _names(g: Grammar, mask: int) -> set[str]:
    return {g.symbol_names[a] for a in range(g.n_terminals) if mask >> a & 1}


def test_usable_rules_are_the_only_predicted_ones() -> None:
    g = FAMILIES["useless"]
    a = g.analysis
    usable = {g.rules[rid] for rid in a.usable_rules()}
    assert ("S", ("U", "a")) not in usable and ("U", ("U", "x")) not in usable
    assert ("Z", ("z",)) in usable  # unreachable, but productive: usable
    predicted = {g.rules[a.item_rule[fi]] for fis in a.predict for fi in fis}
    assert predicted == usable
    assert a.productive == {g.symbol_ids[n] for n in ("S", "Z")}


def test_items_follow_the_rules() -> None:
    g = FAMILIES["expr"]
    a = g.analysis
    for rid, (lhs, rhs) in enumerate(g.rule_table):
        first = a.rule_first[rid]
        assert a.item_next[first:first + len(rhs) + 1] == [*rhs, -1]
        assert set(a.item_lhs[first:first + len(rhs) + 1]) == {lhs}
        assert set(a.item_rule[first:first + len(rhs) + 1]) == {rid}
    ends = {a.item_rule[e] for e in a.start_end_items}
    assert ends == set(g.rules_by_lhs[g.start_id])


def test_first_masks_and_lookahead() -> None:
    g = FAMILIES["expr"]
    a = g.analysis
    first = a.first_masks()
    for nt in ("E", "T", "F"):
        assert _names(g, first[g.symbol_ids[nt]]) == {"(", "x"}
    g = FAMILIES["nullable"]
    a = g.analysis
    for fi, mask in a.lookahead()[g.symbol_ids["A"]]:
        rhs = g.rule_table[a.item_rule[fi]][1]
        if not rhs:
            assert mask == -1  # A -> ε may be followed by anything
    s_rules = {g.rules[a.item_rule[fi]]: m for fi, m in a.lookahead()[g.symbol_ids["S"]]}
    assert _names(g, s_rules[("S", ("A", "B", "A", "c"))]) == {"a", "b", "c"}
    assert s_rules[("S", ("B",))] == -1


@settings(max_examples=100, deadline=None)
@given(g=random_grammars())
def test_first_masks_contain_every_derivable_first_terminal(g: Grammar) -> None:
    first = g.analysis.first_masks()
    for name in g.nonterminals:
        mask = first[g.symbol_ids[name]]
        for w in words(["a", "b"], 3):
            if w and derives(g, w, start=name):
                assert mask >> g.symbol_ids[w[0]] & 1, (name, w)


def test_an_extension_is_analysed_over_its_new_rules_only() -> None:
    g = FAMILIES["expr"]
    ext = g.with_rules([("Q", ("E", ")")), ("N", ())], start="Q")
    a, b = g.analysis, ext.analysis
    assert b.base is a and b.first_rule == len(g.rules)
    assert b.nullable == a.nullable | {ext.symbol_ids["N"]}
    assert b.productive >= a.productive
    assert b.terminal_ids is a.terminal_ids
    # The base is untouched by its extension.
    assert len(a.item_next) < len(b.item_next) and len(a.predict) == len(g.symbol_names)
