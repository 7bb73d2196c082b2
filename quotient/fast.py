"""Fast forward Earley recognizer: practical Earley parsing over a lazily built LR(0) ε-DFA.

This is the recognizer behind ``Grammar.recognizer()``. It decides, terminal by terminal,
whether the input so far is a prefix of a sentence (``scan`` returns ``None`` as soon as it is
not) and whether it is a whole sentence (``is_complete``). It builds no parse forest and keeps
no provenance; ``quotient/earley.py`` is the reference recognizer that does.

Method (Aycock & Horspool, "Practical Earley Parsing", 2002):

* Grammar symbols, rules and LR(0) items are small integers. An Earley item is a pair
  ``(dfa_state, origin)`` where ``dfa_state`` is a *set* of LR(0) items sharing one origin, so a
  chart holds a handful of pairs instead of hundreds of dotted rules.
* DFA states come in two kinds. A *kernel* state is the goto of some state on a symbol (its
  items share the origin of the state it came from). A *prediction* state holds everything
  predicted at the current position (origin = this chart); all kernels of a chart share one
  prediction state, named by the set of nonterminals it predicts. Both kinds are closed under
  skipping nullable nonterminals (the ε-DFA), which makes nullable completions free.
* States and their goto edges are built lazily and interned, so the automaton only ever
  contains the part of the LR(0) DFA that inputs actually reach.
* Completion of nonterminal ``X`` started at chart ``o`` yields a set of items that depends only
  on ``o`` and the charts before it, never on the current chart. It is computed once per
  ``(o, X)``, closed under further completions, and memoised on ``o``. Within one chart, the
  chain of completions through its prediction state (``NAME -> atom -> ... -> test`` in Python)
  is memoised on the prediction state itself and shared by every chart that has it.

Persistence: a :class:`State` is one chart. It points at the charts its items started in and at
nothing else, so scanning 50 different terminals from one state creates 50 small charts that
share all their history; nothing is ever copied or mutated except memo tables. Scan results are
memoised per ``(state, terminal)``.

Extensions: :meth:`Automaton.extend` compiles a grammar made of a base grammar's rules plus
rules whose left-hand sides are new nonterminals (as quotient grammars are). Base rules never
mention the new nonterminals, so every DFA state built only from base items is the same in the
extension: such states are interned in, and shared with, the base automaton; only states that
contain new items belong to the extension. Compiling an extension is therefore linear in the
number of new rules.

Prefix property: ``scan`` returning a state (not ``None``) means "some sentence starts with this
input" only if every nonterminal of the grammar is productive; grammars from ``Grammar`` are
pruned before they get here. Not thread-safe for concurrent writers of the same charts' memo
tables beyond what the GIL gives (a race can only build an equal duplicate DFA state).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["Automaton", "State", "automaton", "recognizer"]

# goto entry meaning "no transition on this symbol" (None means "not computed yet").
_NO = False


class _DState:
    """One state of the lazily built LR(0) ε-DFA (a kernel or a prediction state)."""

    __slots__ = (
        "auto",
        "bysym",
        "chains",
        "completed",
        "goto",
        "items",
        "nts_out",
        "pred",
        "pstate",
        "tnames",
    )

    def __init__(self, auto: Automaton, items: frozenset[int], kernel: bool) -> None:
        self.auto = auto
        self.items = items
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
        self.goto: dict[int, _DState | bool] = {}
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
        self.pstate: _DState | None | bool = _NO  # the prediction state of this kernel alone
        self.chains: dict[int, tuple[tuple[_DState, ...], frozenset[int]]] = {}

    def fill(self, sym: int) -> _DState | bool:
        """Compute (and remember) the goto on `sym`; ``False`` when there is none."""
        its = self.bysym.get(sym)
        if its is None:
            self.goto[sym] = _NO
            return _NO
        t = self.auto.kernel_state([i + 1 for i in its])
        self.goto[sym] = t
        return t

    def chain(self, x: int) -> tuple[tuple[_DState, ...], frozenset[int]]:
        """Completing `x` at this prediction state's chart, closed under further completions
        inside the same chart: the kernel states reached and the nonterminals completed
        (including `x`)."""
        got = self.chains.get(x)
        if got is not None:
            return got
        states: list[_DState] = []
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

    def own_prediction(self) -> _DState | None:
        """The prediction state of a chart whose only kernel state is this one."""
        p = self.pstate
        if p is _NO:
            p = self.auto.prediction_state(self.pred) if self.pred else None
            self.pstate = p
        return p  # type: ignore[return-value]


class Automaton:
    """Integer tables of one grammar and its lazily built LR(0) ε-DFA.

    Built from a grammar's integer encoding (``Grammar.symbol_names``, ``n_terminals``,
    ``rule_table``, ``start_id``, ``nullable_ids``, ``productive_ids``): use
    :func:`automaton`, which caches the result on the grammar. With `base`, `rule_table` holds
    only the rules added to `base`'s grammar, whose left-hand sides are new nonterminals.

    Rules that use an unproductive nonterminal are dropped: they derive nothing, and keeping
    them would let ``scan`` accept prefixes that have no completion.
    """

    def __init__(
        self,
        symbol_names: Sequence[str],
        n_terminals: int,
        rule_table: Sequence[tuple[int, tuple[int, ...]]],
        start_id: int,
        nullable_ids: Iterable[int],
        productive_ids: Iterable[int],
        base: Automaton | None = None,
    ) -> None:
        self.base = base
        self.names = symbol_names
        self.n_terminals = n_terminals
        if base is None:
            self.terminal_ids: dict[str, int] = {
                symbol_names[i]: i for i in range(n_terminals)
            }
            self.item_next: list[int] = []
            self.item_lhs: list[int] = []
            self.nsyms_base = 0
            self.nitems_base = 0
        else:
            if n_terminals != base.n_terminals:
                raise ValueError("an extension cannot add terminals to its base grammar")
            self.terminal_ids = base.terminal_ids
            self.item_next = list(base.item_next)
            self.item_lhs = list(base.item_lhs)
            self.nsyms_base = len(base.names)
            self.nitems_base = len(base.item_next)
        productive = frozenset(productive_ids)
        self.rules_of: dict[int, list[int]] = {}  # nonterminal -> first item of each rule
        nxt = self.item_next
        for lhs, rhs in rule_table:
            if base is not None and lhs < self.nsyms_base:
                raise ValueError(
                    f"extension rules must define new nonterminals; {symbol_names[lhs]!r} is "
                    "a symbol of the base grammar"
                )
            if lhs not in productive or any(
                x >= n_terminals and x not in productive for x in rhs
            ):
                continue
            self.rules_of.setdefault(lhs, []).append(len(nxt))
            nxt.extend(rhs)
            nxt.append(-1)
            self.item_lhs.extend([lhs] * (len(rhs) + 1))
        self.nullable = frozenset(nullable_ids)
        self._direct_pred: dict[int, tuple[int, ...]] = {}
        self._pred_closure: dict[int, frozenset[int]] = {}
        self._pred_items: dict[int, frozenset[int]] = {}
        self._kernels: dict[frozenset[int], _DState] = {}
        self._predictions: dict[frozenset[int], _DState] = {}
        self._unions: dict[frozenset[_DState], _DState | None] = {}
        if start_id < n_terminals:
            raise ValueError(f"start symbol {symbol_names[start_id]!r} is a terminal")
        self.start = start_id
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
            for i in self.rules_of.get(x, ()):
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
            for i in self.rules_of.get(x, ()):
                out.append(i)
                while nxt[i] >= 0 and nxt[i] in nullable:
                    i += 1
                    out.append(i)
            got = frozenset(out)
            self._pred_items[x] = got
        return got

    # -- DFA states (interned; base-only states live in the base automaton) ----------------

    def kernel_state(self, items: Iterable[int]) -> _DState:
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
                st = _DState(self, key, kernel=True)
            self._kernels[key] = st
        return st

    def prediction_state(self, nts: frozenset[int]) -> _DState:
        """The prediction state holding every rule of the nonterminals `nts`."""
        st = self._predictions.get(nts)
        if st is None:
            if self.base is not None and max(nts) < self.nsyms_base:
                st = self.base.prediction_state(nts)
            else:
                items: set[int] = set()
                for x in nts:
                    items |= self.pred_items(x)
                st = _DState(self, frozenset(items), kernel=False)
            self._predictions[nts] = st
        return st

    def union_prediction(self, kernels: frozenset[_DState]) -> _DState | None:
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

    def initial(self) -> State:
        """A fresh root chart (own memo tables) for this automaton."""
        return State(self, (), self.root_prediction, None)


class State:
    """A persistent recognizer state: one Earley chart, shared by every state scanned from it.

    Never mutated after creation except for its memo tables, so it is safe to keep and to
    scan many different terminals from.
    """

    __slots__ = ("_allowed", "_auto", "_cmemo", "_kernels", "_next", "_pred", "_root")

    def __init__(
        self,
        auto: Automaton,
        kernels: tuple[tuple[_DState, State], ...],
        pred: _DState | None,
        root: State | None,
    ) -> None:
        self._auto = auto
        self._kernels = kernels
        self._pred = pred
        self._root = self if root is None else root
        self._next: dict[int, State | bool] = {}
        self._cmemo: dict[int, frozenset[tuple[_DState, State]]] = {}
        self._allowed: frozenset[str] | None = None

    # -- public API ------------------------------------------------------------------------

    def scan(self, terminal: str) -> State | None:
        """The state after `terminal`, or ``None`` when no sentence starts so.

        Raises ``KeyError`` naming `terminal` when the grammar does not know it.
        """
        sid = self._auto.terminal_ids.get(terminal)
        if sid is None:
            raise KeyError(f"unknown terminal {terminal!r}")
        nxt = self._next.get(sid)
        if nxt is None:
            nxt = self._step(sid)
        return nxt or None

    def scan_many(self, terminals: Iterable[str]) -> State | None:
        """The state after all of `terminals` in order, or ``None`` once no sentence starts so."""
        ids = self._auto.terminal_ids
        st = self
        # Every chart allocates a few small containers; on a long input the cyclic garbage
        # collector would walk the growing chart tree again and again (4x the parse time on a
        # 14,000-terminal file). Charts are only ever freed by reference counting, so pause it.
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            for name in terminals:
                sid = ids.get(name)
                if sid is None:
                    raise KeyError(f"unknown terminal {name!r}")
                nxt = st._next.get(sid)
                if nxt is None:
                    nxt = st._step(sid)
                if not nxt:
                    return None
                st = nxt  # type: ignore[assignment]
        finally:
            if paused:
                gc.enable()
        return st

    def is_complete(self) -> bool:
        """True iff the input scanned so far is a sentence of the grammar."""
        start = self._auto.start
        root = self._root
        if self is root:
            return start in self._auto.nullable
        for k, o in self._kernels:
            if o is root and start in k.completed:
                return True
        return False

    def allowed_terminals(self) -> frozenset[str]:
        """The terminals that `scan` accepts from this state."""
        got = self._allowed
        if got is None:
            parts = [k.tnames for k in {k for k, _o in self._kernels}]
            if self._pred is not None:
                parts.append(self._pred.tnames)
            got = frozenset().union(*parts)
            self._allowed = got
        return got

    def __repr__(self) -> str:
        return f"<quotient.fast.State: {len(self._kernels)} kernel items>"

    # -- the Earley step -------------------------------------------------------------------

    def _step(self, a: int) -> State | bool:
        """Scan terminal id `a` (not memoised yet): build the next chart and memoise it."""
        scanned = []
        p = self._pred
        if p is not None:
            t = p.goto.get(a)
            if t is None:
                t = p.fill(a)
            if t:
                scanned.append((t, self))
        for k, o in self._kernels:
            t = k.goto.get(a)
            if t is None:
                t = k.fill(a)
            if t:
                scanned.append((t, o))
        if not scanned:
            self._next[a] = _NO
            return _NO
        items = set(scanned)
        for k, o in scanned:
            for x in k.completed:
                c = o._cmemo.get(x)
                if c is None:
                    c = o._completion(x)
                items |= c
        kstates = frozenset(k for k, _o in items)
        if len(kstates) == 1:
            (only,) = kstates
            pred = only.own_prediction()
        else:
            pred = self._auto.union_prediction(kstates)
        nxt = State(self._auto, tuple(items), pred, self._root)
        self._next[a] = nxt
        return nxt

    def _completion(self, x: int) -> frozenset[tuple[_DState, State]]:
        """Items created when a nonterminal `x` that started at this chart is completed,
        closed under the completions they cause in turn (all at this chart or earlier ones,
        so the result never depends on the chart where `x` ends)."""
        out: set[tuple[_DState, State]] = set()
        work: list[tuple[State, int]] = [(self, x)]
        done = {(self, x)}
        first = True
        while work:
            o, y = work.pop()
            if not first:
                memo = o._cmemo.get(y)
                if memo is not None:
                    out |= memo
                    continue
            first = False
            p = o._pred
            if p is not None:
                states, nts = p.chain(y)
                for s in states:
                    out.add((s, o))
            else:
                nts = (y,)
            for k, ko in o._kernels:
                outs = k.nts_out
                goto = k.goto
                for z in nts:
                    if z not in outs:
                        continue
                    t = goto.get(z)
                    if t is None:
                        t = k.fill(z)
                    it = (t, ko)
                    if it in out:
                        continue
                    out.add(it)
                    for w in t.completed:  # type: ignore[union-attr]
                        pair = (ko, w)
                        if pair not in done:
                            done.add(pair)
                            work.append(pair)
        got = frozenset(out)
        self._cmemo[x] = got
        return got


_CACHE_KEY = "quotient.fast.automaton"


def automaton(grammar: Any) -> Automaton:
    """The compiled tables of `grammar` (a ``quotient.Grammar``), cached on it.

    A grammar made by ``base.with_rules(...)`` (``grammar.base`` set) extends the base's
    cached tables instead of compiling from scratch.
    """
    cache = grammar._cache
    got = cache.get(_CACHE_KEY)
    if got is None:
        base = grammar.base
        if base is None:
            got = Automaton(
                grammar.symbol_names,
                grammar.n_terminals,
                grammar.rule_table,
                grammar.start_id,
                grammar.nullable_ids,
                grammar.productive_ids,
            )
        else:
            got = Automaton(
                grammar.symbol_names,
                grammar.n_terminals,
                grammar.rule_table[grammar.n_base_rules :],
                grammar.start_id,
                grammar.nullable_ids,
                grammar.productive_ids,
                base=automaton(base),
            )
        cache[_CACHE_KEY] = got
    return got


def recognizer(grammar: Any) -> State:
    """A fresh recognizer state for the empty input over `grammar`.

    Each call gets its own chart storage (so memo tables of one request do not outlive it);
    the DFA tables are shared through the grammar's cache.
    """
    return automaton(grammar).initial()
