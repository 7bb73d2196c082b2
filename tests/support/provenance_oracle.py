"""A naive Earley-over-NFA run that records every item creation: the tests' reading of Fig. 2.

This is a test oracle, not engine code: a global worklist of ``(chart, item)`` pairs, where
completion and prediction scan whole charts instead of using indexes, so the run is simple to
check by reading (and slow). `quotient.nfa_charts.parse_nfa` and the quotient extraction are
checked against it (`test_quotient_provenance.py`).
"""

from __future__ import annotations

from quotient import Grammar, Nfa
from quotient.analysis import GrammarAnalysis
from quotient.keys import MASK, SHIFT
from quotient.nfa_charts import terminal_transitions

Creation = tuple  # ("init",) | ("predict", key) | ("scan", chart, key) | ("complete", ...)


class ProvenanceCharts:
    """Charts of the naive run; ``created[(q, key)]`` lists every way item ``key`` of chart
    ``q`` was created, duplicates included:

    * ``("init",)``: initialization (start rules at the start state);
    * ``("predict", key_p)``: predicted by item ``key_p`` of the same chart;
    * ``("scan", p, key_p)``: scanned from item ``key_p`` of chart ``p``;
    * ``("complete", key_w, q_done, key_done)``: item ``key_w`` (waiting in the chart where
      the completed item started) advanced by the complete item ``key_done`` of ``q_done``.

    Item keys use the engine's encoding (`quotient.keys`).
    """

    def __init__(self, analysis: GrammarAnalysis, start: int,
                 finals_of: dict[int, list[int]],
                 created: dict[tuple[int, int], list[Creation]]) -> None:
        self.analysis = analysis
        self.start = start
        self.finals_of = finals_of
        self.created = created

    def chart(self, q: int) -> set[int]:
        """The item keys of chart `q`."""
        return {key for (s, key) in self.created if s == q}


def parse_nfa_provenance(g: Grammar, nfa: Nfa) -> ProvenanceCharts:
    """Saturate Earley charts over `nfa` naively, recording every item creation."""
    a = g.analysis
    delta, finals_of, useful = terminal_transitions(a, nfa)
    inext, ilhs, predict = a.item_next, a.item_lhs, a.predict
    n_t = a.n_terminals
    created: dict[tuple[int, int], list[Creation]] = {}
    charts: dict[int, set[int]] = {q: set() for q in range(nfa.n_states) if useful[q]}
    work: list[tuple[int, int]] = []

    def add(q: int, key: int, how: Creation) -> None:
        record = created.get((q, key))
        if record is None:
            created[(q, key)] = [how]
            charts[q].add(key)
            work.append((q, key))
        elif how not in record:
            record.append(how)

    if useful[nfa.start]:
        for fi in predict[a.start_id]:
            add(nfa.start, (nfa.start << SHIFT) | fi, ("init",))
    while work:
        q, key = work.pop()
        item = key & MASK
        sym = inext[item]
        if sym < 0:
            origin, lhs = key >> SHIFT, ilhs[item]
            for w in list(charts.get(origin, ())):
                if inext[w & MASK] == lhs:
                    add(q, w + 1, ("complete", w, q, key))
        elif sym < n_t:
            for d in delta[q].get(sym, ()):
                add(d, key + 1, ("scan", q, key))
        else:
            for fi in predict[sym]:
                add(q, (q << SHIFT) | fi, ("predict", key))
            # Late arrival: B may already have completed from this chart (also nullable B).
            for p, chart in list(charts.items()):
                for done in list(chart):
                    if (done >> SHIFT) == q and inext[done & MASK] < 0 \
                            and ilhs[done & MASK] == sym:
                        add(p, key + 1, ("complete", key, p, done))
    return ProvenanceCharts(a, nfa.start, finals_of, created)
