"""The reference Earley recognizer: over strings (persistent states) and over NFAs.

Items are integers. Every rule ``A -> X1 .. Xn`` owns the consecutive *dotted item* ids
``first(r) .. first(r)+n`` (dot before X1 .. dot at the end), so advancing the dot is ``+1``.
An Earley item in a chart is the key ``origin << SHIFT | dotted_item``, where ``origin`` is the
chart (string case) or NFA state (NFA case) where its left side started; advancing the dot is
still ``key + 1``.

Only *usable* rules are predicted: rules whose symbols are all productive. Unproductive rules
can never finish a sentence, and leaving them out is what gives the recognizer Earley's
prefix property: a state that scanned ``u`` is non-None only if ``u`` extends to a sentence.

String recognizer (`recognizer`, `EarleyState`). Charts live in one `ChartStore` shared by
every state derived from the same root; a state is ``(store, chart index)``, and `scan`
appends one chart (memoised per ``(chart, terminal)``), so branching into 50 terminals never
copies a chart. Charts form a tree; a chart only refers to charts on its path to the root.
Nullable nonterminals follow Aycock and Horspool: predicting a nullable ``B`` also advances
the predicting item over ``B``, so completions of empty spans never need to revisit items.

NFA recognizer (`parse_nfa`, paper section IV-A). One chart per NFA state; scanning follows
the automaton's edges, and the charts are saturated to a fixpoint with a worklist. Because an
automaton may loop, a chart can receive a new item waiting for ``B`` after ``B`` (started
there) has already completed somewhere; the ``completed[origin][B]`` record of end states lets
the late item advance then, which also covers nullable nonterminals. Outside end charts a
FIRST-set lookahead on the state's outgoing edges skips predictions that could never advance.

Provenance. Quotient extraction (paper Fig. 2) follows every creation of an item backwards.
Scans and completions keep an item's left side and origin, so following them from any item
``(B -> γ • δ, s)`` always ends at ``(B -> • γ δ, s)``, which is created by the initialization
(``B`` the start symbol and ``s`` the start state) or by *each* item of chart ``s`` whose dot
is before ``B``. Those predicting items are exactly ``waiting[s][B]``, kept with duplicates
(one entry per predicting item, even when the predicted items already existed). That list is
therefore the recorded provenance the extraction uses; nothing else about creation order
affects the quotient grammar. `parse_nfa_provenance` records every creation explicitly (a
naive, slow run); the tests check that walking those records as Fig. 2 does gives exactly the
rules the extraction reads off ``waiting``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .grammar import Grammar
    from .nfa import Nfa

SHIFT = 32
MASK = (1 << SHIFT) - 1


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector during a long chart-building loop.

    Charts hold only integers, so they never form reference cycles, but the many sets and
    lists they allocate trigger full collections whose cost grows with everything alive
    (measured: about 2x on a 11,000-terminal file). The previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class EarleyTables:
    """Integer tables of a grammar for the recognizers (built once per grammar, cached).

    For a grammar made by `Grammar.with_rules` the base grammar's tables are extended: old
    item ids and prediction lists stay valid and only the new rules are compiled.
    """

    __slots__ = (
        "grammar", "n_terminals", "item_next", "item_lhs", "item_rule", "rule_first",
        "predict", "nullable", "terminal_ids", "start_id", "start_end_items", "_lookahead",
    )

    def __init__(self, g: Grammar) -> None:
        self.grammar = g
        n_t = g.n_terminals
        self.n_terminals = n_t
        prod = g.productive_ids
        if g.base is not None:
            bt = tables(g.base)
            self.item_next = list(bt.item_next)
            self.item_lhs = list(bt.item_lhs)
            self.item_rule = list(bt.item_rule)
            self.rule_first = list(bt.rule_first)
            self.predict = list(bt.predict)
            self.nullable = bytearray(bt.nullable)
            self.terminal_ids = bt.terminal_ids
            first_rule = g.n_base_rules
            first_sym = len(bt.predict)
        else:
            self.item_next, self.item_lhs, self.item_rule = [], [], []
            self.rule_first, self.predict = [], []
            self.nullable = bytearray()
            self.terminal_ids = {g.symbol_names[i]: i for i in range(n_t)}
            first_rule = 0
            first_sym = 0
        new_syms = len(g.symbol_names) - first_sym
        predict: list[list[int]] = [[] for _ in range(new_syms)]
        table = g.rule_table
        for rid in range(first_rule, len(table)):
            lhs, rhs = table[rid]
            first = len(self.item_next)
            self.rule_first.append(first)
            self.item_next.extend(rhs)
            self.item_next.append(-1)
            self.item_lhs.extend([lhs] * (len(rhs) + 1))
            self.item_rule.extend([rid] * (len(rhs) + 1))
            if lhs in prod and all(s < n_t or s in prod for s in rhs):
                predict[lhs - first_sym].append(first)
        self.predict.extend(tuple(p) for p in predict)
        nullable = g.nullable_ids
        self.nullable.extend(1 if first_sym + i in nullable else 0 for i in range(new_syms))
        self.start_id = g.start_id
        self.start_end_items = tuple(
            self.rule_first[rid] + len(table[rid][1]) for rid in g.rules_by_lhs[g.start_id]
        )
        self._lookahead: list[tuple[tuple[int, int], ...]] | None = None

    def lookahead(self) -> list[tuple[tuple[int, int], ...]]:
        """Per nonterminal, its predicted first items with a FIRST mask: ``(item, mask)``.

        ``mask`` has bit ``a`` set when the rule's right side can start with terminal ``a``;
        it is -1 (all bits) when the right side is nullable. Computed on first use (only the
        NFA parse filters predictions with it).
        """
        if self._lookahead is None:
            g = self.grammar
            n_t = self.n_terminals
            nullable = self.nullable
            first = [1 << a for a in range(n_t)] + [0] * (len(self.predict) - n_t)
            changed = True
            while changed:
                changed = False
                for lhs, rhs in g.rule_table:
                    m = 0
                    for sym in rhs:
                        m |= first[sym]
                        if sym < n_t or not nullable[sym]:
                            break
                    if m & ~first[lhs]:
                        first[lhs] |= m
                        changed = True
            out: list[tuple[tuple[int, int], ...]] = []
            table = g.rule_table
            irule = self.item_rule
            for fis in self.predict:
                row = []
                for fi in fis:
                    rhs = table[irule[fi]][1]
                    m = 0
                    for sym in rhs:
                        m |= first[sym]
                        if sym < n_t or not nullable[sym]:
                            break
                    else:
                        m = -1  # the whole right side is nullable
                    row.append((fi, m))
                out.append(tuple(row))
            self._lookahead = out
        return self._lookahead

    def terminal_id(self, name: str) -> int:
        """Id of terminal `name`; KeyError naming it when the grammar has no such terminal."""
        try:
            return self.terminal_ids[name]
        except KeyError:
            raise KeyError(name) from None


def tables(g: Grammar) -> EarleyTables:
    """The (cached) recognizer tables of `g`."""
    t = g._cache.get("earley_tables")
    if t is None:
        t = g._cache["earley_tables"] = EarleyTables(g)
    return t


# --------------------------------------------------------------------- string recognizer


class ChartStore:
    """All charts reachable from one root state; see the module docstring."""

    __slots__ = ("t", "keys", "waiting", "scannable", "succ")

    def __init__(self, t: EarleyTables) -> None:
        self.t = t
        self.keys: list[set[int]] = []
        self.waiting: list[dict[int, list[int]]] = []
        self.scannable: list[dict[int, list[int]]] = []
        self.succ: list[dict[int, int]] = []  # memo: terminal id -> next chart (-1: dead)
        self._build(list(t.predict[t.start_id]))

    def _build(self, kernel: list[int]) -> int:
        """Append the chart whose initial items are `kernel` and saturate it."""
        t = self.t
        inext, ilhs, predict, nullable = t.item_next, t.item_lhs, t.predict, t.nullable
        n_t = t.n_terminals
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
        return any(e in keys for e in self.t.start_end_items)


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
        nxt = store.scan(self.index, store.t.terminal_id(terminal))
        return None if nxt < 0 else EarleyState(store, nxt)

    def scan_many(self, terminals: Iterable[str]) -> EarleyState | None:
        """State after all of `terminals`, or None as soon as one is rejected."""
        store = self.store
        tid = store.t.terminal_id
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
        names = self.store.t.grammar.symbol_names
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
    """Root state of the reference string recognizer of `g` (a fresh chart store)."""
    return EarleyState(ChartStore(tables(g)), 0)


def recognizes(g: Grammar, word: Sequence[str]) -> bool:
    """Whether `g` derives the terminal list `word`."""
    st = recognizer(g).scan_many(word)
    return st is not None and st.is_complete()


# --------------------------------------------------------------------- NFA recognizer


class NfaCharts:
    """Saturated Earley charts of a grammar over an automaton, one chart per state.

    ``keys[q]`` holds the items of chart ``q`` (None for states that are unreachable or cannot
    reach a final state; they are never parsed); ``waiting[q][B]`` the items of chart ``q``
    with the dot before nonterminal ``B`` (the prediction provenance, see the module
    docstring). ``finals_of[f]`` are the charts at which final state ``f`` of the original
    automaton is reached, i.e. the states whose epsilon closure contains ``f``.
    """

    __slots__ = ("t", "start", "keys", "waiting", "finals_of")

    def __init__(self, t: EarleyTables, start: int, keys: list[set[int] | None],
                 waiting: list[dict[int, list[int]]], finals_of: dict[int, list[int]]) -> None:
        self.t = t
        self.start = start
        self.keys = keys
        self.waiting = waiting
        self.finals_of = finals_of

    def accepts(self) -> bool:
        """Whether some word of the automaton is a sentence of the grammar."""
        ends = self.t.start_end_items
        base = self.start << SHIFT
        return any(
            (base | e) in self.keys[q]
            for qs in self.finals_of.values()
            for q in qs
            for e in ends
        )


def _epsilon_free(t: EarleyTables, nfa: Nfa) -> tuple[list[dict[int, list[int]]],
                                                       dict[int, list[int]], list[bool]]:
    """Transitions over terminal ids without epsilon edges, restricted to useful states.

    Returns (delta, finals_of, useful): ``delta[q][a]`` are the targets of ``q`` on ``a``
    (through epsilon closures on both sides), ``finals_of[f]`` the useful states whose closure
    contains final ``f``, and ``useful[q]`` whether ``q`` is reachable and co-reachable.
    """
    n = nfa.n_states
    closures = [nfa.epsilon_closure([q]) for q in range(n)]
    tid = t.terminal_id
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
    return out, finals_of, useful


def parse_nfa(g: Grammar, nfa: Nfa) -> NfaCharts:
    """Saturate the Earley charts of `g` over the automaton `nfa` (paper section IV-A).

    KeyError naming the terminal if an edge carries a name that is not a terminal of `g`.
    """
    t = tables(g)
    with gc_paused():
        return _parse_nfa(t, nfa)


def _parse_nfa(t: EarleyTables, nfa: Nfa) -> NfaCharts:
    delta, finals_of, useful = _epsilon_free(t, nfa)
    n = nfa.n_states
    keys: list[set[int] | None] = [set() if u else None for u in useful]
    waiting: list[dict[int, list[int]]] = [{} for _ in range(n)]
    completed: list[dict[int, set[int]]] = [{} for _ in range(n)]
    agenda: list[list[int]] = [[] for _ in range(n)]
    # Lookahead filter: a rule predicted in a chart that is not an end chart is only useful
    # if its right side can start with a terminal on an edge leaving that state, or is
    # nullable; any other predicted item can never advance there. The filtered items are
    # dead weight for the quotient too: the extraction reads items of end charts (never
    # filtered) and predictors of nonterminals that consumed a terminal leaving their start
    # state, which pass the filter.
    ends = {q for qs in finals_of.values() for q in qs}
    out_mask = [
        -1 if q in ends else sum(1 << a for a in delta[q]) for q in range(n)
    ]
    la = t.lookahead()
    start = nfa.start
    if useful[start]:
        m = out_mask[start]
        init = [(start << SHIFT) | fi for fi, f in la[t.start_id] if f & m]
        keys[start].update(init)  # type: ignore[union-attr]
        agenda[start].extend(init)
    active = [start] if agenda[start] else []
    inext, ilhs = t.item_next, t.item_lhs
    n_t = t.n_terminals
    while active:
        s = active.pop()
        ag = agenda[s]
        ks = keys[s]
        assert ks is not None
        ws, cs, ds = waiting[s], completed[s], delta[s]
        here = s << SHIFT
        mask = out_mask[s]
        while ag:
            key = ag.pop()
            item = key & MASK
            sym = inext[item]
            if sym < 0:
                origin = key >> SHIFT
                lhs = ilhs[item]
                ends = completed[origin].get(lhs)
                if ends is None:
                    completed[origin][lhs] = {s}
                elif s in ends:
                    continue
                else:
                    ends.add(s)
                for w in waiting[origin].get(lhs, ()):
                    w += 1
                    if w not in ks:
                        ks.add(w)
                        ag.append(w)
                continue
            if sym < n_t:
                targets: Iterable[int] = ds.get(sym, ())
            else:
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
    return NfaCharts(t, start, keys, waiting, finals_of)


# --------------------------------------------------------------------- explicit provenance


class ProvenanceCharts:
    """Charts of a plain, unoptimised Earley-over-NFA run that records every creation.

    ``created[(q, key)]`` lists every way the item ``key`` of chart ``q`` was created,
    duplicates included, as tuples:

    * ``("init",)``: initialization (start rules at the start state);
    * ``("predict", key_p)``: predicted by item ``key_p`` of the same chart;
    * ``("scan", p, key_p)``: scanned from item ``key_p`` of chart ``p``;
    * ``("complete", key_w, q_done, key_done)``: item ``key_w`` (waiting in the chart where
      the completed item started) advanced by the complete item ``key_done`` of ``q_done``.

    Item keys use the same encoding as the fast path. This run exists to state the paper's
    Fig. 2 extraction literally and to cross-check `parse_nfa` and the quotient code; it is
    not used on hot paths.
    """

    __slots__ = ("t", "start", "finals_of", "created")

    def __init__(self, t: EarleyTables, start: int, finals_of: dict[int, list[int]],
                 created: dict[tuple[int, int], list[tuple]]) -> None:
        self.t = t
        self.start = start
        self.finals_of = finals_of
        self.created = created

    def chart(self, q: int) -> set[int]:
        """The item keys of chart `q`."""
        return {key for (s, key) in self.created if s == q}


def parse_nfa_provenance(g: Grammar, nfa: Nfa) -> ProvenanceCharts:
    """Saturate Earley charts over `nfa` naively, recording every item creation.

    A global worklist of ``(chart, item)`` pairs; completion and prediction scan whole charts
    instead of using indexes, so the run is simple to check by reading (and slow).
    """
    t = tables(g)
    delta, finals_of, useful = _epsilon_free(t, nfa)
    inext, ilhs, predict = t.item_next, t.item_lhs, t.predict
    n_t = t.n_terminals
    created: dict[tuple[int, int], list[tuple]] = {}
    charts: dict[int, set[int]] = {q: set() for q in range(nfa.n_states) if useful[q]}
    work: list[tuple[int, int]] = []

    def add(q: int, key: int, how: tuple) -> None:
        record = created.get((q, key))
        if record is None:
            created[(q, key)] = [how]
            charts[q].add(key)
            work.append((q, key))
        elif how not in record:
            record.append(how)

    if useful[nfa.start]:
        for fi in predict[t.start_id]:
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
    return ProvenanceCharts(t, nfa.start, finals_of, created)
