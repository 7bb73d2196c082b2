"""Unit tests for quotient.grammar: lark loading, encoding, derived sets, transformations."""

import pytest
from hypothesis import given, settings

from quotient import Grammar, GrammarError, TerminalDef
from tests.support.quotient_families import FAMILIES, derives, random_grammars, recognizes, words

LARK = r"""
start: stmt+
stmt: NAME "=" expr ";"          -> assign
    | "print" "(" [args] ")" ";"
    | _block
_block: "{" stmt* "}"
?expr: expr ("+"|"-") atom | atom
atom: NUMBER | NAME | "(" expr ")" | pair{NAME, NUMBER}
args: expr ("," expr)*
pair{a, b}: "<" a "," b ">"
NAME: /[a-z]+/
NUMBER.2: /[0-9]+/
COMMENT: /#[^\n]*/
%ignore COMMENT
%ignore " "
%declare INDENT
"""


def test_from_lark_terminals_and_definitions():
    g = Grammar.from_lark(LARK)
    assert g.start == "start"
    expected = {"NAME", "NUMBER", "EQUAL", "SEMICOLON", "LPAR", "RPAR", "PRINT", "INDENT"}
    assert expected <= g.terminals
    assert g.terminal_defs["NUMBER"] == TerminalDef("NUMBER", "re", "[0-9]+", (), 2)
    assert g.terminal_defs["LPAR"].kind == "str" and g.terminal_defs["LPAR"].pattern == "("
    assert "COMMENT" in g.ignored and len(g.ignored) == 2
    assert g.declared == frozenset({"INDENT"})
    assert "INDENT" not in g.terminal_defs


def test_from_lark_language():
    g = Grammar.from_lark(LARK)
    ok = [
        ["NAME", "EQUAL", "NUMBER", "SEMICOLON"],
        ["PRINT", "LPAR", "RPAR", "SEMICOLON"],
        ["PRINT", "LPAR", "NAME", "COMMA", "NUMBER", "PLUS", "NAME", "RPAR", "SEMICOLON"],
        ["LBRACE", "RBRACE", "NAME", "EQUAL", "LPAR", "NAME", "RPAR", "SEMICOLON"],
        ["NAME", "EQUAL", "LESSTHAN", "NAME", "COMMA", "NUMBER", "MORETHAN", "SEMICOLON"],
    ]
    bad = [
        [],
        ["NAME", "EQUAL", "SEMICOLON"],
        ["PRINT", "LPAR", "COMMA", "RPAR", "SEMICOLON"],
        ["LBRACE", "NAME", "EQUAL", "NUMBER", "SEMICOLON"],
    ]
    for w in ok:
        assert recognizes(g, w), w
        assert derives(g, w), w
    for w in bad:
        assert not recognizes(g, w), w
        assert not derives(g, w), w


def test_from_lark_undefined_rule_names_symbol_and_rule():
    with pytest.raises(GrammarError) as exc:
        Grammar.from_lark('start: "a" missing\n')
    assert "missing" in str(exc.value) and "start" in str(exc.value)


def test_from_lark_bad_start_and_syntax():
    with pytest.raises(GrammarError, match="nope"):
        Grammar.from_lark('start: "a"\n', start="nope")
    with pytest.raises(GrammarError):
        Grammar.from_lark("start: (\n")


def test_constructor_undefined_symbol_names_symbol_and_rule():
    with pytest.raises(GrammarError) as exc:
        Grammar([("S", ("a", "T"))], "S", terminals=["a"])
    assert "'T'" in str(exc.value) and "S -> a T" in str(exc.value)


def test_constructor_rejects_terminal_start_and_overlap():
    with pytest.raises(GrammarError):
        Grammar([("S", ("a",))], "a")
    with pytest.raises(GrammarError):
        Grammar([("S", ("a",)), ("a", ())], "S", terminals=["a"])


def test_integer_encoding():
    g = FAMILIES["expr"]
    assert g.n_terminals == 5
    for name in g.terminals:
        assert g.symbol_ids[name] < g.n_terminals
    for name in g.nonterminals:
        assert g.symbol_ids[name] >= g.n_terminals
    for (lhs, rhs), (lid, rids) in zip(g.rules, g.rule_table, strict=True):
        assert g.symbol_names[lid] == lhs
        assert tuple(g.symbol_names[i] for i in rids) == rhs
    for rid, (lid, _) in enumerate(g.rule_table):
        assert rid in g.rules_by_lhs[lid]
    assert g.symbol_names[g.start_id] == "E"


def test_nullable_and_productive():
    g = FAMILIES["nullable"]
    assert g.nullable == frozenset({"S", "A", "B"})
    assert FAMILIES["expr"].nullable == frozenset()
    u = FAMILIES["useless"]
    assert not u.is_productive_symbol("U")
    assert u.is_productive_symbol("S") and u.is_productive_symbol("a")


def test_pruned_removes_unproductive_and_unreachable():
    u = FAMILIES["useless"]
    p = u.pruned()
    assert {lhs for lhs, _ in p.rules} == {"S"}
    assert ("S", ("U", "a")) not in p.rules
    assert p.terminals == u.terminals  # the alphabet is kept
    assert FAMILIES["expr"].pruned() is FAMILIES["expr"]


def test_pruned_empty_language():
    g = Grammar([("S", ("S", "a"))], "S")
    p = g.pruned()
    assert p.rules == [] and p.start == "S"
    assert not recognizes(p, []) and not recognizes(p, ["a"])


def test_reversed():
    g = FAMILIES["lists"]
    r = g.reversed()
    assert r.reversed() is g
    assert ("L", ("x", ",", "L")) in r.rules
    for w in (["l", "x", ",", "x"], ["r", "x"]):
        assert derives(g, w) and derives(r, w[::-1])


def test_with_rules_extends_encoding():
    g = FAMILIES["expr"]
    g2 = g.with_rules([("Top", ("E", "*", "+")), ("Top", ())], start="Top")
    assert g2.base is g and g2.n_base_rules == len(g.rules)
    for name in g.symbol_names:
        assert g2.symbol_ids[name] == g.symbol_ids[name]
    assert g2.rule_table[: len(g.rule_table)] == g.rule_table
    assert g2.start == "Top" and "Top" in g2.nullable
    assert recognizes(g2, ["x", "+", "x", "*", "+"]) and recognizes(g2, [])
    assert not recognizes(g2, ["x"])
    # The base's analysis is extended, not redone: its prediction lists are the very same
    # objects, the new rules' items come after the base's, and the base is left unchanged.
    a1, a2 = g.analysis, g2.analysis
    assert a2.base is a1
    n_items = len(a1.item_next)
    assert all(x is y for x, y in zip(a1.predict, a2.predict, strict=False))
    assert a2.item_next[:n_items] == a1.item_next and len(a2.item_next) > n_items
    assert len(a1.predict) == len(g.symbol_names)


def test_with_rules_errors():
    g = FAMILIES["expr"]
    with pytest.raises(GrammarError, match="already"):
        g.with_rules([("E", ("x",))])
    with pytest.raises(GrammarError) as exc:
        g.with_rules([("New", ("E", "Missing"))])
    assert "Missing" in str(exc.value) and "New" in str(exc.value)


def test_with_rules_chain_derived_sets():
    g = FAMILIES["dyck"]
    g2 = g.with_rules([("P", ("S", "Q")), ("Q", ("P",))], start="P")
    assert "P" not in g2.nullable and not g2.is_productive_symbol("P")
    g3 = g2.with_rules([("R", ("S",)), ("R", ("(",))], start="R")
    assert "R" in g3.nullable and g3.is_productive_symbol("R")


@settings(max_examples=100, deadline=None)
@given(g=random_grammars())
def test_transformations_keep_the_language(g):
    pruned, rev, part = g.pruned(), g.reversed(), g.productive_part()
    for w in words(["a", "b"], 4):
        inside = derives(g, w)
        assert derives(pruned, w) == inside, w
        assert derives(part, w) == inside, w
        assert derives(rev, w[::-1]) == inside, w
    # Pruned grammars have only productive, reachable nonterminals.
    assert all(pruned.is_productive_symbol(lhs) for lhs, _ in pruned.rules)
    assert rev.symbol_ids == dict(g.symbol_ids) and rev.reversed() is g


@settings(max_examples=100, deadline=None)
@given(g=random_grammars())
def test_derived_sets_match_definitions(g):
    # Independent oracle: shortest derivable word length by Bellman-Ford style relaxation.
    inf = float("inf")
    shortest = {n: inf for n in g.nonterminals}
    for _ in range(len(g.rules) + 1):
        for lhs, rhs in g.rules:
            length = sum(1 if s in g.terminals else shortest[s] for s in rhs)
            shortest[lhs] = min(shortest[lhs], length)
    for name in g.nonterminals:
        assert (name in g.nullable) == derives(g, [], start=name), name
        assert g.is_productive_symbol(name) == (shortest[name] < inf), name
        if shortest[name] <= 5:
            n = int(shortest[name])
            assert any(derives(g, w, start=name) for w in words(["a", "b"], n)), name
