"""The lazily built LR(0) ε-DFA of a grammar, shared by every recognizer state over it.

Practical Earley parsing (Aycock & Horspool, "Practical Earley Parsing", 2002) runs Earley's
algorithm over the states of this automaton instead of over dotted items (`quotient.fast`):

* A *kernel* state is a goto of some state on a symbol, or the union of such states that share
  an origin (each chart merges its items to one per origin). A *prediction* state holds
  everything predicted in a chart, named by the set of nonterminals it predicts. Both are
  closed under skipping nullable nonterminals (the ε-DFA), which makes completions of empty
  spans free.
* States and their goto edges are built lazily and interned, so only the part of the LR(0)
  DFA that inputs reach is ever built. Inside a chart, the chain of completions through its
  prediction state (``NAME -> atom -> ... -> test`` in Python) is memoised on that state.
* Only usable rules are predicted (the grammar's `GrammarAnalysis`), which gives the
  recognizer Earley's prefix property.

Extensions: a grammar made by ``base.with_rules(...)`` adds rules whose left sides are new
nonterminals. Base rules never mention those, so every state made only of base items is the
same in the extension: such states are interned in, and shared with, the base automaton; only
states holding new items belong to the extension. An extension's automaton costs time linear
in its new rules, and a request's states never leak into the base.

One automaton per grammar (`automaton`), kept in a weak mapping: the grammar knows nothing of
this recognizer.

Threads: the automaton is shared by every language over its grammar, and the vLLM server
builds a language on a worker thread while the engine's thread extends the same automaton
through its rows' Earley steps.  Interning is what must not race: two threads that both miss a
state and both make one would leave the same item set as two objects (a state compared by
identity then differs from itself).  Each interning table is filled with ``dict.setdefault``,
one atomic step under the GIL (its keys are frozensets of ints or of states, whose hashing
runs no Python code), so the first object stored is the one every thread gets; a state made
by the loser is dropped unused.  The other memo tables (gotos, chains, closures) store values
computed from interned states, so a duplicate computation stores an equal value.  Making
``automaton`` itself is locked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from .analysis import GrammarAnalysis
from .keys import MASK

if TYPE_CHECKING:
    from .grammar import Grammar

__all__ = ["Automaton", "DfaState", "automaton"]

# goto entry meaning "no transition on this symbol" (None means "not computed yet").
_NO = False


class DfaState:
    """One state of the lazily built LR(0) ε-DFA (a kernel or a prediction state).

    Its fields are read by the chart store (`quotient.fast`): ``goto`` (symbol -> state or
    ``False``, filled by `fill`), ``completed`` (nonterminals a kernel state completes),
    ``nts_out`` and ``tnames`` (the nonterminals and terminal names it has gotos on).
    """

    __slots__ = (
        "auto",
        "bysym",
        "chains",
        "completed",
        "goto",
        "items",
        "nts",
        "nts_out",
        "pred",
        "pstate",
        "tnames",
    )

    def __init__(self, auto: Automaton, items: frozenset[int], kernel: bool) -> None:
        self.auto = auto
        self.items = items
        #: a prediction state's nonterminals (its key in the automaton), set by
        #: `Automaton.prediction_state`; None for a kernel state (keyed by its items)
        self.nts: frozenset[int] | None = None
        nxt = auto.item_next
        lhs = auto.item_lhs
        n_t = auto.n_terminals
        bysym: dict[int, list[int]] = {}
        completed = set()
        for i in items:
            x = nxt[i]
            if x < 0:
                completed.add(lhs[i])
            else:
                lst = bysym.get(x)
                if lst is None:
                    bysym[x] = [i]
                else:
                    lst.append(i)
        self.bysym = bysym
        self.goto: dict[int, DfaState | bool] = {}
        names = auto.names
        self.tnames = frozenset(names[x] for x in bysym if x < n_t)
        self.nts_out = frozenset(x for x in bysym if x >= n_t)
        # Completed items of a prediction state are nullable completions at the current
        # position; the ε-closure already skipped them, so they are never completed again.
        self.completed = tuple(completed) if kernel else ()
        if kernel:
            pred: set[int] = set()
            closure = auto.pred_closure
            for x in self.nts_out:
                pred |= closure(x)
            self.pred = frozenset(pred)
        else:
            self.pred = frozenset()
        self.pstate: DfaState | None | bool = _NO  # the prediction state of this kernel alone
        self.chains: dict[int, tuple[tuple[DfaState, ...], frozenset[int]]] = {}

    def fill(self, sym: int) -> DfaState | bool:
        """Compute (and remember) the goto on `sym`; ``False`` when there is none."""
        its = self.bysym.get(sym)
        if its is None:
            self.goto[sym] = _NO
            return _NO
        t = self.auto.kernel_state([i + 1 for i in its])
        self.goto[sym] = t
        return t

    def chain(self, x: int) -> tuple[tuple[DfaState, ...], frozenset[int]]:
        """Completing `x` at this prediction state's chart, closed under further completions
        inside the same chart: the kernel states reached and the nonterminals completed
        (including `x`)."""
        got = self.chains.get(x)
        if got is not None:
            return got
        states: list[DfaState] = []
        nts = {x}
        work = [x]
        goto = self.goto
        while work:
            y = work.pop()
            s = goto.get(y)
            if s is None:
                s = self.fill(y)
            if s:
                states.append(s)
                for z in s.completed:
                    if z not in nts:
                        nts.add(z)
                        work.append(z)
        got = (tuple(states), frozenset(nts))
        self.chains[x] = got
        return got

    def own_prediction(self) -> DfaState | None:
        """The prediction state of a chart whose only kernel state is this one."""
        p = self.pstate
        if p is _NO:
            p = self.auto.prediction_state(self.pred) if self.pred else None
            self.pstate = p
        return p  # type: ignore[return-value]


class Automaton:
    """One grammar's lazily built LR(0) ε-DFA, over its `GrammarAnalysis`.

    Use :func:`automaton`, which shares one automaton per grammar. With `base` (the automaton
    of ``grammar.base``), the analysis is an extension's: its new rules' left sides are new
    nonterminals, and DFA states made of base items only are interned in `base`.

    Only usable rules are predicted (the analysis's ``predict`` lists): a rule that uses an
    unproductive nonterminal derives nothing, and keeping it would let ``scan`` accept
    prefixes that have no completion.
    """

    def __init__(self, analysis: GrammarAnalysis, base: Automaton | None = None) -> None:
        if analysis.n_symbols > MASK:
            raise ValueError(f"too many symbols ({analysis.n_symbols}; at most {MASK})")
        if (base is None) != (analysis.base is None) or (
                base is not None and base.analysis is not analysis.base):
            raise ValueError("an extension's automaton needs the automaton of its base grammar")
        self.analysis = analysis
        self.base = base
        self.names = analysis.symbol_names
        self.n_terminals = analysis.n_terminals
        self.terminal_ids = analysis.terminal_ids
        self.item_next = analysis.item_next
        self.item_lhs = analysis.item_lhs
        self.rules_of = analysis.predict  # nonterminal -> first item of each usable rule
        self.nullable = analysis.nullable
        self.nsyms_base = analysis.first_symbol
        self.nitems_base = len(base.item_next) if base is not None else 0
        self._direct_pred: dict[int, tuple[int, ...]] = {}
        self._pred_closure: dict[int, frozenset[int]] = {}
        self._pred_items: dict[int, frozenset[int]] = {}
        self._kernels: dict[frozenset[int], DfaState] = {}
        self._predictions: dict[frozenset[int], DfaState] = {}
        self._unions: dict[frozenset[DfaState], DfaState | None] = {}
        self._merges: dict[frozenset[DfaState], DfaState] = {}
        self.start = analysis.start_id
        self.root_prediction = self.prediction_state(self.pred_closure(self.start))

    # -- grammar closures (lazy, per nonterminal) ------------------------------------------

    def _owns(self, sym: int) -> bool:
        return self.base is None or sym >= self.nsyms_base

    def direct_predictions(self, x: int) -> tuple[int, ...]:
        """Nonterminals that can start a rule of `x` (after any nullable prefix)."""
        got = self._direct_pred.get(x)
        if got is None:
            out = []
            nxt = self.item_next
            for i in self.rules_of[x]:
                while True:
                    y = nxt[i]
                    if y < self.n_terminals:  # the rule's end (-1) or a terminal
                        break
                    out.append(y)
                    if y not in self.nullable:
                        break
                    i += 1
            got = tuple(set(out))
            self._direct_pred[x] = got
        return got

    def pred_closure(self, x: int) -> frozenset[int]:
        """All nonterminals predicted when `x` is predicted (including `x`)."""
        got = self._pred_closure.get(x)
        if got is not None:
            return got
        if not self._owns(x):
            return self.base.pred_closure(x)  # type: ignore[union-attr]
        seen = {x}
        work = [x]
        while work:
            y = work.pop()
            for z in self.direct_predictions(y):
                if z in seen:
                    continue
                if not self._owns(z):
                    # A base nonterminal only predicts base nonterminals: take its closure whole.
                    seen |= self.base.pred_closure(z)  # type: ignore[union-attr]
                    continue
                seen.add(z)
                work.append(z)
        got = frozenset(seen)
        self._pred_closure[x] = got
        return got

    def pred_items(self, x: int) -> frozenset[int]:
        """Items of `x`'s rules at the start, advanced over nullable prefixes."""
        got = self._pred_items.get(x)
        if got is None:
            if not self._owns(x):
                return self.base.pred_items(x)  # type: ignore[union-attr]
            out = []
            nxt = self.item_next
            nullable = self.nullable
            for i in self.rules_of[x]:
                out.append(i)
                while nxt[i] >= 0 and nxt[i] in nullable:
                    i += 1
                    out.append(i)
            got = frozenset(out)
            self._pred_items[x] = got
        return got

    # -- DFA states (interned; base-only states live in the base automaton) ----------------

    def kernel_state(self, items: Iterable[int]) -> DfaState:
        """The kernel state whose items are `items` closed over nullable nonterminals."""
        nxt = self.item_next
        nullable = self.nullable
        closed = set()
        for i in items:
            closed.add(i)
            while nxt[i] >= 0 and nxt[i] in nullable:
                i += 1
                closed.add(i)
        key = frozenset(closed)
        st = self._kernels.get(key)
        if st is None:
            if self.base is not None and max(key) < self.nitems_base:
                st = self.base.kernel_state(key)
            else:
                st = DfaState(self, key, kernel=True)
            st = self._kernels.setdefault(key, st)  # another thread's, if it was first
        return st

    def merged_state(self, states: frozenset[DfaState]) -> DfaState:
        """The kernel state holding the items of all of `states` (kernel states that share
        an origin in some chart: one Earley item instead of several)."""
        st = self._merges.get(states)
        if st is None:
            items = frozenset().union(*(s.items for s in states))
            st = self._kernels.get(items)
            if st is None:
                if self.base is not None and max(items) < self.nitems_base:
                    st = self.base.kernel_state(items)
                else:
                    st = DfaState(self, items, kernel=True)
                st = self._kernels.setdefault(items, st)
            st = self._merges.setdefault(states, st)
        return st

    def prediction_state(self, nts: frozenset[int]) -> DfaState:
        """The prediction state holding every rule of the nonterminals `nts`."""
        st = self._predictions.get(nts)
        if st is None:
            if self.base is not None and max(nts) < self.nsyms_base:
                st = self.base.prediction_state(nts)
            else:
                items: set[int] = set()
                for x in nts:
                    items |= self.pred_items(x)
                st = DfaState(self, frozenset(items), kernel=False)
                st.nts = nts
            st = self._predictions.setdefault(nts, st)
        return st

    def union_prediction(self, kernels: frozenset[DfaState]) -> DfaState | None:
        """The prediction state of a chart whose kernel states are `kernels`."""
        try:
            return self._unions[kernels]
        except KeyError:
            pass
        pred: set[int] = set()
        for k in kernels:
            pred |= k.pred
        st = self.prediction_state(frozenset(pred)) if pred else None
        self._unions[kernels] = st
        return st

    def stats(self) -> dict[str, int]:
        """Sizes of the DFA built so far (for benchmarks and debugging)."""
        return {
            "symbols": len(self.names),
            "items": len(self.item_next),
            "kernel_states": len(self._kernels),
            "prediction_states": len(self._predictions),
        }


#: One automaton per grammar, kept as long as the grammar lives. An automaton refers to the
#: grammar's analysis, never to the grammar itself (which would keep it alive forever).
_automata: WeakKeyDictionary[Grammar, Automaton] = WeakKeyDictionary()
#: Held while an automaton is made (re-entered for an extension's base).
_making = threading.RLock()


def automaton(grammar: Grammar) -> Automaton:
    """The shared automaton of `grammar`; an extension (``grammar.base`` set) extends its
    base's automaton instead of compiling from scratch."""
    got = _automata.get(grammar)
    if got is None:
        with _making:
            got = _automata.get(grammar)
            if got is None:
                base = automaton(grammar.base) if grammar.base is not None else None
                got = _automata[grammar] = Automaton(grammar.analysis, base)
    return got
