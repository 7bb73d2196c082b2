"""Left and right quotients of a grammar by regular languages (paper section IV-B).

Left quotient ``x \\ L(g) = {u : w·u ∈ L(g) for some w ∈ L(x)}``. After the NFA recognizer
has saturated the charts of `g` over `x`, a derived nonterminal ``B!s`` stands for "the rest
of a ``B`` that started at state ``s`` and whose consumed part reaches an end chart":

* every item ``(B -> γ • δ, s)`` of an end chart gives ``B!s -> δ`` (complete items give
  ``B!s -> ε``);
* whenever ``B!s`` is used, every item ``(A -> α • B β, o)`` of chart ``s`` (the items that
  predicted ``B`` there, i.e. its recorded provenance) gives ``A!o -> B!s β``;
* the quotient's start is ``S!q0`` for the start symbol ``S`` and the automaton's start
  state ``q0`` (the item created by the initialization).

The right quotient reverses: ``L(g) / x = reverse(reverse(x) \\ L(reverse(g)))``. Derived
rules are reversed back, so the result is the original (productive) grammar plus the derived
rules, built with `Grammar.with_rules` so compiled tables of the base are reused.

Results are pruned of unproductive derived rules; together with the recognizer never
predicting unusable base rules this gives Earley's prefix property on quotient grammars.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .earley import MASK, SHIFT, NfaCharts, parse_nfa
from .grammar import Grammar, Rule
from .nfa import Nfa


def _separator(g: Grammar) -> str:
    """A marker for derived names that no symbol of `g` contains (``!`` for lark grammars)."""
    sep = g._cache.get("quotient_separator")
    if sep is None:
        sep = "!"
        while any(sep in name for name in g.symbol_names):
            sep += "!"
        g._cache["quotient_separator"] = sep
    return sep


def _extract(charts: NfaCharts, end_charts: Iterable[int], suffix: str,
             sep: str, rules: dict[Rule, None]) -> str | None:
    """Add the quotient rules for the given end charts to `rules`; return the start name.

    Derived names are ``B{sep}{state}{suffix}``. Returns None when the start nonterminal was
    never opened (no word of the automaton reaching these charts is a prefix of a sentence).
    """
    t = charts.t
    g = t.grammar
    names = g.symbol_names
    rhs_names = [rhs for _, rhs in g.rules]
    ilhs, irule, rfirst = t.item_lhs, t.item_rule, t.rule_first
    keys, waiting = charts.keys, charts.waiting
    derived: dict[int, str] = {}
    todo: list[int] = []

    def name_of(lhs: int, origin: int) -> str:
        code = (origin << SHIFT) | lhs
        name = derived.get(code)
        if name is None:
            name = derived[code] = f"{names[lhs]}{sep}{origin}{suffix}"
            todo.append(code)
        return name

    for q in end_charts:
        chart = keys[q]
        if chart is None:
            continue
        for key in chart:
            item = key & MASK
            rid = irule[item]
            rules[(name_of(ilhs[item], key >> SHIFT), rhs_names[rid][item - rfirst[rid]:])] = None
    while todo:
        code = todo.pop()
        sym, s = code & MASK, code >> SHIFT
        used = derived[code]
        for w in waiting[s].get(sym, ()):
            item = w & MASK
            rid = irule[item]
            tail = rhs_names[rid][item - rfirst[rid] + 1:]
            rules[(name_of(ilhs[item], w >> SHIFT), (used, *tail))] = None
    return derived.get((charts.start << SHIFT) | g.start_id)


def _productive_rules(rules: Iterable[Rule], base: Grammar) -> list[Rule]:
    """The derived rules whose symbols are all productive (base symbols are assumed to be)."""
    rules = list(rules)
    lhs_set = {lhs for lhs, _ in rules}
    found: set[str] = set()
    missing: list[int] = []
    users: dict[str, list[int]] = {}
    queue: list[str] = []
    for i, (lhs, rhs) in enumerate(rules):
        need = 0
        for s in rhs:
            if s in lhs_set:
                need += 1
                users.setdefault(s, []).append(i)
            elif s not in base.symbol_ids:
                need = -1  # a derived name without rules: never productive
                break
        missing.append(need)
        if need == 0 and lhs not in found:
            found.add(lhs)
            queue.append(lhs)
    while queue:
        for i in users.pop(queue.pop(), ()):
            if missing[i] > 0:
                missing[i] -= 1
                if missing[i] == 0 and rules[i][0] not in found:
                    found.add(rules[i][0])
                    queue.append(rules[i][0])
    return [
        (lhs, rhs) for lhs, rhs in rules
        if lhs in found and all(s in found or s not in lhs_set for s in rhs)
    ]


def _fresh_name(g: Grammar, taken: Iterable[str], stem: str) -> str:
    taken = set(taken)
    name = stem
    while name in g.symbol_ids or name in taken:
        name += "'"
    return name


def _as_nfa(x: Sequence[str] | Nfa) -> Nfa:
    return x if isinstance(x, Nfa) else Nfa.from_symbols(list(x))


def _finish(base: Grammar, rules: dict[Rule, None], start: str | None, reverse: bool,
            sep: str) -> tuple[Grammar, bool]:
    """Prune, orient and attach derived rules to `base`. Returns (grammar, language nonempty)."""
    kept = _productive_rules(rules, base)
    if reverse:
        kept = [(lhs, rhs[::-1]) for lhs, rhs in kept]
    live = {lhs for lhs, _ in kept}
    if start is None or start not in live:
        empty = _fresh_name(base, live, f"{base.start}{sep}empty")
        return base.with_rules(kept, start=empty), False
    return base.with_rules(kept, start=start), True


def left_quotient(g: Grammar, x: Sequence[str] | Nfa) -> Grammar:
    """Grammar of ``{u : w·u ∈ L(g), w ∈ L(x)}``; `x` a terminal list or an `Nfa`.

    KeyError naming the terminal when `x` uses a name that is not a terminal of `g`.
    """
    base = g.productive_part()
    charts = parse_nfa(base, _as_nfa(x))
    ends = sorted({q for qs in charts.finals_of.values() for q in qs})
    sep = _separator(base)
    rules: dict[Rule, None] = {}
    start = _extract(charts, ends, "", sep, rules)
    return _finish(base, rules, start, False, sep)[0]


def right_quotient(g: Grammar, x: Sequence[str] | Nfa) -> Grammar:
    """Grammar of ``{u : u·w ∈ L(g), w ∈ L(x)}``; `x` a terminal list or an `Nfa`."""
    rev = x[::-1] if not isinstance(x, Nfa) else x.reversed()
    grammar, _ = right_quotient_split(g, _as_nfa(rev), _single=True)
    return grammar


def right_quotient_split(g: Grammar, rev_nfa: Nfa, *, _single: bool = False
                         ) -> tuple[Grammar, dict[int, str | None]]:
    """Right quotients of `g` by the suffix sets of the finals of `rev_nfa`, from one parse.

    `rev_nfa` accepts *reversed* suffixes. For each final state ``f`` the returned mapping
    names a nonterminal of the returned grammar deriving ``L(g) / {reverse(w) : w leads from
    the start to f}``, or None when that quotient is empty. The grammar's own start symbol
    derives the union of all of them.
    """
    base = g.productive_part()
    rev_g = base.reversed()
    charts = parse_nfa(rev_g, rev_nfa)
    sep = _separator(base)
    rules: dict[Rule, None] = {}
    starts: dict[int, str | None] = {}
    if _single:
        ends = sorted({q for qs in charts.finals_of.values() for q in qs})
        start = _extract(charts, ends, "", sep, rules)
        grammar, _ = _finish(base, rules, start, True, sep)
        return grammar, {}
    for f, qs in charts.finals_of.items():
        starts[f] = _extract(charts, qs, f"@{f}", sep, rules)
    kept = _productive_rules(rules, base)
    kept = [(lhs, rhs[::-1]) for lhs, rhs in kept]
    live = {lhs for lhs, _ in kept}
    result = {f: (s if s is not None and s in live else None) for f, s in starts.items()}
    top = _fresh_name(base, live, f"{base.start}{sep}split")
    kept.extend((top, (s,)) for s in dict.fromkeys(result.values()) if s is not None)
    return base.with_rules(kept, start=top), result


__all__ = ["left_quotient", "right_quotient", "right_quotient_split"]
