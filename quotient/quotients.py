"""Left and right quotients of a grammar by regular languages (paper section IV-B).

Left quotient ``x \\ L(g) = {u : w·u ∈ L(g) for some w ∈ L(x)}``. After the NFA recognizer
has saturated the charts of `g` over `x`, a derived nonterminal ``B!s`` stands for "the rest
of a ``B`` that started at state ``s`` and whose consumed part reaches an end chart":

* every item ``(B -> γ • δ, s)`` of an end chart gives ``B!s -> δ`` (complete items give
  ``B!s -> ε``);
* whenever ``B!s`` is used, every item ``(A -> α • B β, o)`` of chart ``s`` (the items that
  predicted ``B`` there, i.e. its recorded provenance) gives ``A!o -> B!s β``;
* the quotient's language is that of ``S!q0`` for the start symbol ``S`` and the automaton's
  start state ``q0`` (the item created by the initialization); a fresh top nonterminal
  derives it (or, for `right_quotient_split`, the union of the per-final starts).

The right quotient reverses: ``L(g) / x = reverse(reverse(x) \\ L(reverse(g)))``. Derived
rules are reversed back, so the result is the original (productive) grammar plus the derived
rules, attached with `Grammar.with_encoded_rules` so the base's ids and compiled tables are
reused and no symbol name is looked up.

Results are pruned of unproductive derived rules; together with the recognizer never
predicting unusable base rules this gives Earley's prefix property on quotient grammars.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .analysis import least_fixpoint
from .grammar import Grammar
from .keys import MASK, SHIFT
from .nfa import Nfa
from .nfa_charts import NfaCharts, parse_nfa


def _separator(g: Grammar) -> str:
    """A marker for derived names that no symbol of `g` contains (``!`` for lark grammars)."""
    sep = "!"
    while any(sep in name for name in g.symbol_names):
        sep += "!"
    return sep


class _Derived:
    """Derived nonterminals and rules under construction, encoded as integers.

    A derived nonterminal gets the id after the base's symbols (``first + its index``);
    rules are ``(lhs_id, rhs_ids)`` kept in insertion order without duplicates.
    """

    __slots__ = ("first", "names", "ids", "rules")

    def __init__(self, first: int) -> None:
        self.first = first
        self.names: list[str] = []
        self.ids: dict[tuple[int, int, str], int] = {}
        self.rules: dict[tuple[int, tuple[int, ...]], None] = {}


def _extract(charts: NfaCharts, end_charts: Iterable[int], suffix: str, sep: str,
             out: _Derived) -> int | None:
    """Add the quotient rules for the given end charts to `out`; return the start id.

    Derived names are ``B{sep}{state}{suffix}``. Returns None when the start nonterminal was
    never opened (no word of the automaton reaching these charts is a prefix of a sentence).
    """
    a = charts.analysis
    names = a.symbol_names
    rule_rhs = [rhs for _, rhs in a.rule_table]
    ilhs, irule, rfirst = a.item_lhs, a.item_rule, a.rule_first
    keys, waiting = charts.keys, charts.waiting
    ids, dnames, rules = out.ids, out.names, out.rules
    first = out.first
    todo: list[tuple[int, int, int]] = []

    def derived(lhs: int, origin: int) -> int:
        code = (lhs, origin, suffix)
        did = ids.get(code)
        if did is None:
            did = ids[code] = first + len(dnames)
            dnames.append(f"{names[lhs]}{sep}{origin}{suffix}")
            todo.append((lhs, origin, did))
        return did

    for q in end_charts:
        chart = keys[q]
        if chart is None:
            continue
        for key in chart:
            item = key & MASK
            rid = irule[item]
            rules[(derived(ilhs[item], key >> SHIFT), rule_rhs[rid][item - rfirst[rid]:])] = None
    while todo:
        sym, s, used = todo.pop()
        for w in waiting[s].get(sym, ()):
            item = w & MASK
            rid = irule[item]
            tail = rule_rhs[rid][item - rfirst[rid] + 1:]
            rules[(derived(ilhs[item], w >> SHIFT), (used, *tail))] = None
    return ids.get((a.start_id, charts.start, suffix))


def _productive_rules(out: _Derived) -> tuple[list[tuple[int, tuple[int, ...]]], set[int]]:
    """The derived rules whose symbols are all productive, and the productive derived ids.

    Base symbols in derived rules are productive: the charts only contain usable rules.  So
    this is the productive fixpoint of the derived rules with every base id counted as a
    terminal (ids below ``out.first``)."""
    rules = list(out.rules)
    first = out.first
    found = set(least_fixpoint(rules, 0, first, (), terminals_count=True))
    kept = [(lhs, rhs) for lhs, rhs in rules if all(s < first or s in found for s in rhs)]
    return kept, found


def _fresh_name(g: Grammar, taken: Iterable[str], stem: str) -> str:
    taken = set(taken)
    name = stem
    while name in g.symbol_ids or name in taken:
        name += "'"
    return name


def _as_nfa(x: Sequence[str] | Nfa) -> Nfa:
    return x if isinstance(x, Nfa) else Nfa.from_symbols(list(x))


def _build(base: Grammar, out: _Derived, reverse: bool,
           tops: list[tuple[str, list[int]]]) -> tuple[Grammar, dict[int, int | None]]:
    """Attach the productive derived rules to `base`.

    `tops` lists ``(stem, start ids)``: each adds a fresh nonterminal deriving the union of the
    live ones among them; the first becomes the grammar's start. Derived nonterminals are
    renumbered densely (dead ones dropped). Returns the grammar and old id -> new id.
    """
    kept, live = _productive_rules(out)
    first = out.first
    renum: dict[int, int | None] = {}
    new_names: list[str] = []
    for did in range(first, first + len(out.names)):
        if did in live:
            renum[did] = first + len(new_names)
            new_names.append(out.names[did - first])
        else:
            renum[did] = None

    def tr(s: int) -> int:
        return s if s < first else renum[s]  # type: ignore[return-value]

    table = [
        (renum[lhs], tuple(tr(s) for s in (rhs[::-1] if reverse else rhs)))
        for lhs, rhs in kept
    ]
    start_id = None
    taken = set(new_names)
    for stem, starts in tops:
        name = _fresh_name(base, taken, stem)
        taken.add(name)
        top = first + len(new_names)
        new_names.append(name)
        table.extend((top, (renum[s],)) for s in dict.fromkeys(starts) if renum[s] is not None)
        if start_id is None:
            start_id = top
    # Every kept derived nonterminal is productive by construction; the tops are when they
    # have a rule. Passing the set spares the analysis a recomputation.
    prod = set(base.analysis.productive)
    prod.update(renum[d] for d in live)  # type: ignore[misc]
    prod.update(lhs for lhs, _ in table)
    g = base.with_encoded_rules(new_names, table, start_id,  # type: ignore[arg-type]
                                productive=prod)
    return g, renum


def left_quotient(g: Grammar, x: Sequence[str] | Nfa) -> Grammar:
    """Grammar of ``{u : w·u ∈ L(g), w ∈ L(x)}``; `x` a terminal list or an `Nfa`.

    KeyError naming the terminal when `x` uses a name that is not a terminal of `g`.
    """
    base = g.productive_part()
    charts = parse_nfa(base, _as_nfa(x))
    ends = sorted({q for qs in charts.finals_of.values() for q in qs})
    sep = _separator(base)
    out = _Derived(len(base.symbol_names))
    start = _extract(charts, ends, "", sep, out)
    grammar, _ = _build(base, out, False, [(f"{base.start}{sep}left", _opt(start))])
    return grammar


def _opt(x: int | None) -> list[int]:
    return [] if x is None else [x]


def right_quotient(g: Grammar, x: Sequence[str] | Nfa) -> Grammar:
    """Grammar of ``{u : u·w ∈ L(g), w ∈ L(x)}``; `x` a terminal list or an `Nfa`."""
    rev = Nfa.from_symbols(list(x)[::-1]) if not isinstance(x, Nfa) else x.reversed()
    base = g.productive_part()
    charts = parse_nfa(base.reversed(), rev)
    ends = sorted({q for qs in charts.finals_of.values() for q in qs})
    sep = _separator(base)
    out = _Derived(len(base.symbol_names))
    start = _extract(charts, ends, "", sep, out)
    grammar, _ = _build(base, out, True, [(f"{base.start}{sep}right", _opt(start))])
    return grammar


def right_quotient_split(g: Grammar, rev_nfa: Nfa) -> tuple[Grammar, dict[int, str | None]]:
    """Right quotients of `g` by the suffix sets of the finals of `rev_nfa`, from one parse.

    `rev_nfa` accepts *reversed* suffixes. For each final state ``f`` the returned mapping
    names a nonterminal of the returned grammar deriving ``L(g) / {reverse(w) : w leads from
    the start to f}``, or None when that quotient is empty. The grammar's own start symbol
    derives the union of all of them.
    """
    base = g.productive_part()
    charts = parse_nfa(base.reversed(), rev_nfa)
    sep = _separator(base)
    out = _Derived(len(base.symbol_names))
    starts = {f: _extract(charts, qs, f"@{f}", sep, out) for f, qs in charts.finals_of.items()}
    found = [s for s in starts.values() if s is not None]
    grammar, renum = _build(base, out, True, [(f"{base.start}{sep}split", found)])
    names = grammar.symbol_names
    result: dict[int, str | None] = {}
    for f, s in starts.items():
        new = None if s is None else renum[s]
        result[f] = None if new is None else names[new]
    return grammar, result


__all__ = ["left_quotient", "right_quotient", "right_quotient_split"]
