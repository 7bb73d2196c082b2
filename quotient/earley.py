"""The reference Earley recognizer over terminal strings, with persistent states.

This is the plain algorithm, kept simple to read; `quotient.fast` is the recognizer Seam runs,
and the tests check the two against each other at every position of many inputs. Both read the
same `GrammarAnalysis`, so they agree by construction on what is nullable and usable.

Items are ints: a dotted item id (see `quotient.analysis`) packed with the chart where its left
side started, ``origin << SHIFT | item`` (`quotient.keys`); advancing the dot is ``key + 1``.
Only usable rules are predicted, which gives Earley's prefix property: a state that scanned
``u`` exists only if ``u`` extends to a sentence.

Charts live in one `ChartStore` shared by every state derived from the same root; a state is
``(store, chart index)``, and `scan` appends one chart (memoised per ``(chart, terminal)``), so
branching into 50 terminals never copies a chart. Charts form a tree; a chart only refers to
charts on its path to the root. Nullable nonterminals follow Aycock and Horspool: predicting a
nullable ``B`` also advances the predicting item over ``B``, so completions of empty spans never
need to revisit items.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .analysis import GrammarAnalysis
from .gc_pause import gc_paused
from .keys import MASK, SHIFT

if TYPE_CHECKING:
    from .grammar import Grammar


class ChartStore:
    """All charts reachable from one root state; see the module docstring."""

    __slots__ = ("analysis", "keys", "waiting", "scannable", "succ")

    def __init__(self, analysis: GrammarAnalysis) -> None:
        self.analysis = analysis
        self.keys: list[set[int]] = []
        self.waiting: list[dict[int, list[int]]] = []
        self.scannable: list[dict[int, list[int]]] = []
        self.succ: list[dict[int, int]] = []  # memo: terminal id -> next chart (-1: dead)
        self._build(list(analysis.predict[analysis.start_id]))

    def _build(self, kernel: list[int]) -> int:
        """Append the chart whose initial items are `kernel` and saturate it."""
        a = self.analysis
        inext, ilhs, predict, nullable = a.item_next, a.item_lhs, a.predict, a.nullable_flags
        n_t = a.n_terminals
        idx = len(self.keys)
        keys: set[int] = set(kernel)
        waiting: dict[int, list[int]] = {}
        scannable: dict[int, list[int]] = {}
        self.keys.append(keys)
        self.waiting.append(waiting)
        self.scannable.append(scannable)
        self.succ.append({})
        all_waiting = self.waiting
        here = idx << SHIFT
        agenda = list(keys)
        pop, push, add = agenda.pop, agenda.append, keys.add
        while agenda:
            key = pop()
            item = key & MASK
            sym = inext[item]
            if sym < 0:
                origin = key >> SHIFT
                if origin == idx:
                    continue  # empty span: Aycock-Horspool advanced the waiting items already
                for w in all_waiting[origin].get(ilhs[item], ()):
                    w += 1
                    if w not in keys:
                        add(w)
                        push(w)
            elif sym < n_t:
                lst = scannable.get(sym)
                if lst is None:
                    scannable[sym] = [key]
                else:
                    lst.append(key)
            else:
                lst = waiting.get(sym)
                if lst is None:
                    waiting[sym] = [key]
                    for fi in predict[sym]:
                        k = here | fi
                        if k not in keys:
                            add(k)
                            push(k)
                else:
                    lst.append(key)
                if nullable[sym]:
                    k = key + 1
                    if k not in keys:
                        add(k)
                        push(k)
        return idx

    def scan(self, chart: int, tid: int) -> int:
        """Index of the chart after scanning terminal id `tid` from `chart`; -1 if none."""
        succ = self.succ[chart]
        nxt = succ.get(tid)
        if nxt is None:
            items = self.scannable[chart].get(tid)
            nxt = self._build([k + 1 for k in items]) if items else -1
            succ[tid] = nxt
        return nxt

    def is_complete(self, chart: int) -> bool:
        keys = self.keys[chart]
        return any(e in keys for e in self.analysis.start_end_items)


class EarleyState:
    """A persistent recognizer state: a handle ``(store, chart index)``."""

    __slots__ = ("store", "index")

    def __init__(self, store: ChartStore, index: int) -> None:
        self.store = store
        self.index = index

    def scan(self, terminal: str) -> EarleyState | None:
        """State after `terminal`, or None if no sentence starts with the input so far.

        KeyError (with the name) if the grammar has no such terminal."""
        store = self.store
        nxt = store.scan(self.index, store.analysis.terminal_id(terminal))
        return None if nxt < 0 else EarleyState(store, nxt)

    def scan_many(self, terminals: Iterable[str]) -> EarleyState | None:
        """State after all of `terminals`, or None as soon as one is rejected."""
        store = self.store
        tid = store.analysis.terminal_id
        idx = self.index
        with gc_paused():
            for name in terminals:
                idx = store.scan(idx, tid(name))
                if idx < 0:
                    return None
        return EarleyState(store, idx)

    def is_complete(self) -> bool:
        """Whether the input scanned so far is a sentence of the grammar."""
        return self.store.is_complete(self.index)

    def allowed_terminals(self) -> frozenset[str]:
        """Terminals that `scan` accepts from this state."""
        names = self.store.analysis.symbol_names
        return frozenset(names[i] for i in self.store.scannable[self.index])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EarleyState)
            and other.store is self.store
            and other.index == self.index
        )

    def __hash__(self) -> int:
        return hash((id(self.store), self.index))

    def __repr__(self) -> str:
        return f"EarleyState(chart={self.index})"


def recognizer(g: Grammar) -> EarleyState:
    """Root state of the reference recognizer of `g` (a fresh chart store)."""
    return EarleyState(ChartStore(g.analysis), 0)
