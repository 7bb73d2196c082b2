"""Earley recognition over a finite automaton: one chart per automaton state (paper IV-A).

`parse_nfa(g, nfa)` saturates the Earley charts of grammar `g` over every word of `nfa` at
once. Scanning follows the automaton's edges, and the charts are saturated to a fixpoint with
a worklist. Items are ints as in `quotient.earley` (``origin << SHIFT | dotted item``), with
``origin`` an automaton state.

Because an automaton may loop, a chart can receive a new item waiting for ``B`` after ``B``
(started there) has already completed somewhere; the ``completed[origin][B]`` record of end
states lets the late item advance then, which also covers nullable nonterminals. Outside end
charts a FIRST-set lookahead on the state's outgoing edges skips predictions that could never
advance.

Provenance, which the quotient extraction reads (paper Fig. 2). Scans and completions keep an
item's left side and origin, so following them back from any item ``(B -> γ • δ, s)`` always
ends at ``(B -> • γ δ, s)``, which is created by the initialization (``B`` the start symbol and
``s`` the start state) or by *each* item of chart ``s`` whose dot is before ``B``. Those
predicting items are exactly ``waiting[s][B]``, kept with duplicates (one entry per predicting
item, even when the predicted items already existed). That list is therefore the recorded
provenance the extraction uses; nothing else about creation order affects the quotient
grammar. The tests replay a naive run that records every creation and check that walking it
as Fig. 2 does gives exactly the rules the extraction reads off ``waiting``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from .analysis import GrammarAnalysis
from .gc_pause import gc_paused
from .keys import MASK, SHIFT
from .nfa import Nfa

if TYPE_CHECKING:
    from .grammar import Grammar


class Transitions(NamedTuple):
    """An automaton over terminal ids without epsilon edges, restricted to useful states.

    ``delta[q][a]`` are the targets of ``q`` on terminal ``a`` (through epsilon closures on
    both sides); ``finals_of[f]`` the useful states whose closure contains final ``f`` of the
    original automaton; ``useful[q]`` whether ``q`` is reachable and co-reachable.
    """

    delta: list[dict[int, list[int]]]
    finals_of: dict[int, list[int]]
    useful: list[bool]


class NfaCharts:
    """Saturated Earley charts of a grammar over an automaton, one chart per state.

    ``keys[q]`` holds the items of chart ``q`` (None for states that are unreachable or cannot
    reach a final state; they are never parsed); ``waiting[q][B]`` the items of chart ``q``
    with the dot before nonterminal ``B`` (the prediction provenance, see the module
    docstring). ``finals_of[f]`` are the charts at which final state ``f`` of the original
    automaton is reached, i.e. the states whose epsilon closure contains ``f``.
    """

    __slots__ = ("analysis", "start", "keys", "waiting", "finals_of")

    def __init__(self, analysis: GrammarAnalysis, start: int, keys: list[set[int] | None],
                 waiting: list[dict[int, list[int]]], finals_of: dict[int, list[int]]) -> None:
        self.analysis = analysis
        self.start = start
        self.keys = keys
        self.waiting = waiting
        self.finals_of = finals_of

    def accepts(self) -> bool:
        """Whether some word of the automaton is a sentence of the grammar."""
        ends = self.analysis.start_end_items
        base = self.start << SHIFT
        return any(
            (base | e) in self.keys[q]  # type: ignore[operator]
            for qs in self.finals_of.values()
            for q in qs
            for e in ends
        )


def terminal_transitions(analysis: GrammarAnalysis, nfa: Nfa) -> Transitions:
    """`nfa`'s edges as terminal ids, epsilon edges folded in, useless states dropped.

    KeyError naming the terminal if an edge carries a name that is not a terminal.
    """
    n = nfa.n_states
    closures = [nfa.epsilon_closure([q]) for q in range(n)]
    tid = analysis.terminal_id
    delta: list[dict[int, set[int]]] = [{} for _ in range(n)]
    seen = [False] * n
    seen[nfa.start] = True
    stack = [nfa.start]
    while stack:
        q = stack.pop()
        row = delta[q]
        for p in closures[q]:
            for sym, d in nfa.edges[p]:
                a = tid(sym)
                tgt = row.get(a)
                if tgt is None:
                    tgt = row[a] = set()
                tgt.add(d)
        for tgt in row.values():
            for d in tgt:
                if not seen[d]:
                    seen[d] = True
                    stack.append(d)
    finals_of = {
        f: [q for q in range(n) if seen[q] and f in closures[q]] for f in sorted(nfa.finals)
    }
    # Co-reachability: walk the reachable transitions backwards from the accepting states.
    back: list[list[int]] = [[] for _ in range(n)]
    for q in range(n):
        if seen[q]:
            for tgt in delta[q].values():
                for d in tgt:
                    back[d].append(q)
    useful = [False] * n
    stack = [q for qs in finals_of.values() for q in qs]
    for q in stack:
        useful[q] = True
    while stack:
        for p in back[stack.pop()]:
            if not useful[p]:
                useful[p] = True
                stack.append(p)
    out: list[dict[int, list[int]]] = []
    for q in range(n):
        out.append({
            a: sorted(d for d in tgt if useful[d])
            for a, tgt in delta[q].items()
            if any(useful[d] for d in tgt)
        } if useful[q] else {})
    finals_of = {f: [q for q in qs if useful[q]] for f, qs in finals_of.items()}
    return Transitions(out, finals_of, useful)


def parse_nfa(g: Grammar, nfa: Nfa) -> NfaCharts:
    """Saturate the Earley charts of `g` over the automaton `nfa` (paper section IV-A).

    KeyError naming the terminal if an edge carries a name that is not a terminal of `g`.
    """
    a = g.analysis
    with gc_paused():
        transitions = terminal_transitions(a, nfa)
        masks = _lookahead_masks(transitions)
        work = _Worklist(nfa.n_states, transitions)
        _seed(work, a, nfa.start, masks)
        _saturate(work, a, transitions, masks)
    return NfaCharts(a, nfa.start, work.keys, work.waiting, transitions.finals_of)


class _Worklist:
    """The charts under construction and what is still to do (one parse)."""

    __slots__ = ("keys", "waiting", "completed", "agenda", "active")

    def __init__(self, n_states: int, transitions: Transitions) -> None:
        # Charts of states that are not useful (unreachable, or no final reachable) stay None.
        self.keys: list[set[int] | None] = [set() if u else None for u in transitions.useful]
        self.waiting: list[dict[int, list[int]]] = [{} for _ in range(n_states)]
        # completed[origin][B]: the states where a B begun at `origin` has ended (late items
        # waiting for B in `origin` advance into each of them).
        self.completed: list[dict[int, set[int]]] = [{} for _ in range(n_states)]
        self.agenda: list[list[int]] = [[] for _ in range(n_states)]
        self.active: list[int] = []  # states whose agenda is not empty


def _lookahead_masks(transitions: Transitions) -> list[int]:
    """Per state, the terminals on its outgoing edges as a bit mask (-1 at end charts).

    A rule predicted in a chart that is not an end chart is only useful if its right side
    can start with one of those terminals, or is nullable; any other predicted item can never
    advance there. The filtered items are dead weight for the quotient too: the extraction
    reads items of end charts (never filtered) and predictors of nonterminals that consumed a
    terminal leaving their start state, which pass the filter.
    """
    ends = {q for qs in transitions.finals_of.values() for q in qs}
    return [-1 if q in ends else sum(1 << t for t in row)
            for q, row in enumerate(transitions.delta)]


def _seed(work: _Worklist, a: GrammarAnalysis, start: int, masks: list[int]) -> None:
    """The initial items: the start symbol's rules at the automaton's start state."""
    chart = work.keys[start]
    if chart is None:
        return
    init = [(start << SHIFT) | fi for fi, f in a.lookahead()[a.start_id] if f & masks[start]]
    chart.update(init)
    work.agenda[start].extend(init)
    if init:
        work.active.append(start)


def _saturate(work: _Worklist, a: GrammarAnalysis, transitions: Transitions,
              masks: list[int]) -> None:
    """Process agendas until no chart changes. Per item, by the symbol after its dot:

    * none (complete): record where its left side ended, and advance the items of its origin
      chart that wait for that left side into this chart;
    * a terminal: advance the item along the state's edges on that terminal;
    * a nonterminal B: record the item as waiting for B; on the first such item in this chart,
      predict B's rules (lookahead-filtered); and advance it over every B that already ended
      having begun here (late arrival, nullable B included).
    """
    keys, waiting, completed, agenda, active = (
        work.keys, work.waiting, work.completed, work.agenda, work.active)
    delta = transitions.delta
    la = a.lookahead()
    inext, ilhs = a.item_next, a.item_lhs
    n_t = a.n_terminals
    while active:
        s = active.pop()
        ag = agenda[s]
        ks = keys[s]
        assert ks is not None
        ws, cs, ds = waiting[s], completed[s], delta[s]
        here = s << SHIFT
        mask = masks[s]
        while ag:
            key = ag.pop()
            item = key & MASK
            sym = inext[item]
            if sym < 0:  # complete
                origin = key >> SHIFT
                lhs = ilhs[item]
                done = completed[origin].get(lhs)
                if done is None:
                    completed[origin][lhs] = {s}
                elif s in done:
                    continue
                else:
                    done.add(s)
                for w in waiting[origin].get(lhs, ()):
                    w += 1
                    if w not in ks:
                        ks.add(w)
                        ag.append(w)
                continue
            if sym < n_t:  # a terminal: follow the edges
                targets: Iterable[int] = ds.get(sym, ())
            else:  # a nonterminal: wait, predict, and catch up with completions
                lst = ws.get(sym)
                if lst is None:
                    ws[sym] = [key]
                    for fi, f in la[sym]:
                        if f & mask:
                            k = here | fi
                            if k not in ks:
                                ks.add(k)
                                ag.append(k)
                else:
                    lst.append(key)
                targets = cs.get(sym, ())
            k = key + 1
            for d in targets:
                kd = keys[d]
                assert kd is not None
                if k not in kd:
                    kd.add(k)
                    if d != s and not agenda[d]:
                        active.append(d)
                    agenda[d].append(k)
