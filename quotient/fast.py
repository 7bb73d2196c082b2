"""The fast forward recognizer: Earley charts over the grammar's LR(0) ε-DFA, per request.

This is the recognizer Seam runs (``quotient.recognizer``). It decides, terminal by terminal,
whether the input so far is a prefix of a sentence (``scan`` returns ``None`` as soon as it is
not) and whether it is a whole sentence (``is_complete``). It builds no parse forest and keeps
no provenance; ``quotient/earley.py`` is the plain reference recognizer, and the tests check
the two against each other. Both read the grammar's one `GrammarAnalysis`.

An Earley item here is a pair ``(dfa_state, origin)`` where ``dfa_state`` is a state of the
grammar's shared automaton (`quotient.lr0`): a *set* of LR(0) items sharing one origin, so a
chart holds a couple of items instead of hundreds of dotted rules. Completing nonterminal
``X`` that started at chart ``o`` yields items that depend only on ``o`` and earlier charts,
never on where ``X`` ended; the result, closed under the further completions it causes, is
computed once per ``(o, X)`` and memoised on ``o``.

Storage and persistence: all charts scanned from one root live in one `_Charts` store as rows
of flat lists, and an Earley item is the int ``origin << SHIFT | local_state_id``
(`quotient.keys`). A `State` is a handle ``(store, chart number)``; a chart only refers to
charts on its path to the root, and is never changed after creation except for memo tables,
so scanning 50 different terminals from one state adds 50 small rows and copies nothing.
Scan results are memoised per ``(chart, terminal)``. Keeping items as ints also keeps charts
out of the cyclic garbage collector's sight (with one small object per item it cost 4x the
parse time on long files).

Prefix property: only usable rules are predicted, so every item of a chart has a completion
and ``scan`` returns ``None`` exactly when no sentence starts with the input. Single-threaded
use per store: concurrent writers to one store's memo tables are not supported.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .keys import MASK, SHIFT
from .lr0 import Automaton, DfaState, automaton

if TYPE_CHECKING:
    from .grammar import Grammar

__all__ = ["State", "recognizer"]


class _Charts:
    """Chart storage shared by every state scanned from one root.

    Charts are rows of flat lists indexed by chart number; an Earley item is the int
    ``origin << SHIFT | lid`` where ``lid`` numbers the DFA states this store has used (so
    items never allocate and the store's goto rows hold only ints). Containers of ints are
    invisible to the cyclic garbage collector, which would otherwise re-walk a long parse's
    millions of small objects (4x the parse time on a 14,000-terminal file).
    """

    __slots__ = (
        "allowed",
        "auto",
        "cmemo",
        "kern",
        "lacc",
        "lchain",
        "lcomp",
        "lgo",
        "lnts",
        "lpred",
        "lshared",
        "merges",
        "nxt",
        "pred",
        "sloc",
        "sobj",
        "unions",
    )

    def __init__(self, auto: Automaton) -> None:
        self.auto = auto
        self.sobj: list[DfaState] = []  # local id -> DFA state
        self.sloc: dict[DfaState, int] = {}  # DFA state -> local id
        self.lgo: list[dict[int, int]] = []  # local goto rows: symbol -> local id, -1: none
        self.lcomp: list[tuple[int, ...]] = []  # completed nonterminals of a kernel state
        self.lnts: list[frozenset[int]] = []  # nonterminals a state has a goto on
        self.lacc: list[bool] = []  # a kernel state completes the start symbol
        self.lpred: list[int] = []  # prediction state of a lone kernel (-2: not computed)
        self.lshared: list[bool] = []  # the state belongs to a root (non-extension) automaton
        self.lchain: dict[int, tuple[tuple[int, ...], frozenset[int]]] = {}
        self.unions: dict[frozenset[int], int] = {}
        self.merges: dict[frozenset[int], int] = {}
        root_pred = auto.root_prediction
        self.kern: list[tuple[int, ...]] = [()]  # chart -> its kernel items
        self.pred: list[int] = [self.local(root_pred)]  # chart -> prediction state (or -1)
        self.nxt: list[dict[int, int]] = [{}]  # chart -> terminal -> next chart (-1: none)
        self.cmemo: list[dict[int, tuple[int, ...]] | None] = [None]  # completions started here
        self.allowed: list[frozenset[str] | None] = [None]

    def local(self, s: DfaState) -> int:
        """The local id of DFA state `s`, assigned on first use."""
        lid = self.sloc.get(s)
        if lid is None:
            lid = len(self.sobj)
            if lid > MASK:
                raise OverflowError("more DFA states than a chart item can address")
            self.sobj.append(s)
            self.sloc[s] = lid
            self.lgo.append({})
            self.lcomp.append(s.completed)
            self.lnts.append(s.nts_out)
            self.lacc.append(self.auto.start in s.completed)
            self.lpred.append(-2)
            self.lshared.append(s.auto.base is None)
        return lid

    def go(self, lid: int, sym: int) -> int:
        """Goto of local state `lid` on `sym` as a local id, -1 when there is none."""
        row = self.lgo[lid]
        t = row.get(sym)
        if t is None:
            s = self.sobj[lid]
            ts = s.goto.get(sym)
            if ts is None:
                ts = s.fill(sym)
            t = self.local(ts) if ts else -1  # type: ignore[arg-type]
            row[sym] = t
        return t

    def chain(self, plid: int, x: int) -> tuple[tuple[int, ...], frozenset[int]]:
        """`DfaState.chain` of local prediction state `plid`, in local ids."""
        key = plid << SHIFT | x
        got = self.lchain.get(key)
        if got is None:
            states, nts = self.sobj[plid].chain(x)
            lids = [self.local(s) for s in states]
            shared = [lid for lid in lids if self.lshared[lid]]
            if len(shared) > 1:  # merged as in `grouped`
                lids = [lid for lid in lids if not self.lshared[lid]] + [self.merge(shared)]
            got = (tuple(lids), nts)
            self.lchain[key] = got
        return got

    def grouped(self, items: set[int]) -> tuple[int, ...]:
        """`items` with the states of each origin merged into one state (one item per
        origin: a chart then holds about two items instead of ten on Python).

        Only states of a root automaton are merged: their unions are interned there and
        reused by every later request, whereas unions involving an extension's own states
        would be built anew for each extension, costing more than they save."""
        groups: dict[int, list[int]] = {}
        out = []
        lshared = self.lshared
        for it in items:
            lid = it & MASK
            if lshared[lid]:
                o = it >> SHIFT
                g = groups.get(o)
                if g is None:
                    groups[o] = [lid]
                else:
                    g.append(lid)
            else:
                out.append(it)
        if len(groups) + len(out) == len(items):
            return tuple(items)
        for o, lids in groups.items():
            if len(lids) == 1:
                out.append(o << SHIFT | lids[0])
            else:
                out.append(o << SHIFT | self.merge(lids))
        return tuple(out)

    def merge(self, lids: list[int]) -> int:
        """Local id of the union of the kernel states `lids`."""
        key = frozenset(lids)
        m = self.merges.get(key)
        if m is None:
            states = frozenset(self.sobj[i] for i in key)
            # Only root-automaton states are merged (see `grouped`): intern the union there,
            # so that it is built once for all requests.
            owner = next(iter(states)).auto
            m = self.local(owner.merged_state(states))
            self.merges[key] = m
        return m

    def prediction_of(self, lids: set[int]) -> int:
        """Local id of the prediction state of a chart whose kernel states are `lids`."""
        if len(lids) == 1:
            (lid,) = lids
            p = self.lpred[lid]
            if p == -2:
                ps = self.sobj[lid].own_prediction()
                p = self.local(ps) if ps is not None else -1
                self.lpred[lid] = p
            return p
        key = frozenset(lids)
        p = self.unions.get(key)
        if p is None:
            lshared = self.lshared
            states = frozenset(self.sobj[i] for i in lids)
            # Kernels of a root automaton predict only its nonterminals: ask it, so the
            # answer is shared by all requests.
            owner = next(iter(states)).auto if all(lshared[i] for i in lids) else self.auto
            ps = owner.union_prediction(states)
            p = self.local(ps) if ps is not None else -1
            self.unions[key] = p
        return p

    def step(self, c: int, a: int) -> int:
        """Scan terminal id `a` from chart `c` (not memoised yet); the new chart or -1."""
        lgo = self.lgo
        new = []
        p = self.pred[c]
        if p >= 0:
            t = lgo[p].get(a)
            if t is None:
                t = self.go(p, a)
            if t >= 0:
                new.append(c << SHIFT | t)
        for it in self.kern[c]:
            lid = it & MASK
            t = lgo[lid].get(a)
            if t is None:
                t = self.go(lid, a)
            if t >= 0:
                new.append(it - lid + t)
        if not new:
            self.nxt[c][a] = -1
            return -1
        items = set(new)
        lcomp = self.lcomp
        cmemo = self.cmemo
        for it in new:
            comp = lcomp[it & MASK]
            if comp:
                o = it >> SHIFT
                memo = cmemo[o]
                for x in comp:
                    done = memo.get(x) if memo is not None else None
                    if done is None:
                        done = self.completion(o, x)
                        memo = cmemo[o]
                    items.update(done)
        kern = self.grouped(items) if len(items) > 1 else tuple(items)
        pred = self.prediction_of({it & MASK for it in kern})
        idx = len(self.kern)
        self.kern.append(kern)
        self.pred.append(pred)
        self.nxt.append({})
        self.cmemo.append(None)
        self.allowed.append(None)
        self.nxt[c][a] = idx
        return idx

    def completion(self, o: int, x: int) -> tuple[int, ...]:
        """Items created when nonterminal `x`, started at chart `o`, is completed, closed under
        the completions they cause in turn. Those all start at `o` or earlier, so the result
        never depends on where `x` ends: it is memoised on `o`."""
        kern = self.kern
        pred = self.pred
        cmemo = self.cmemo
        lnts = self.lnts
        lcomp = self.lcomp
        lgo = self.lgo
        out: set[int] = set()
        top = o << SHIFT | x  # pairs (chart, nonterminal) share the item encoding
        work = [top]
        done = {top}
        while work:
            pair = work.pop()
            oo = pair >> SHIFT
            y = pair & MASK
            if pair != top:
                memo = cmemo[oo]
                if memo is not None:
                    got = memo.get(y)
                    if got is not None:
                        out.update(got)
                        continue
            p = pred[oo]
            if p >= 0:
                states, nts = self.chain(p, y)
                base = oo << SHIFT
                for s in states:
                    out.add(base | s)
            else:
                nts = frozenset((y,))
            for it in kern[oo]:
                lid = it & MASK
                outs = lnts[lid]
                if not outs:
                    continue
                for z in outs & nts if len(outs) < len(nts) else nts & outs:
                    t = lgo[lid].get(z)
                    if t is None:
                        t = self.go(lid, z)
                    ni = it - lid + t
                    if ni in out:
                        continue
                    out.add(ni)
                    comp = lcomp[t]
                    if comp:
                        base = it - lid
                        for w in comp:
                            pr = base | w
                            if pr not in done:
                                done.add(pr)
                                work.append(pr)
        got = self.grouped(out) if len(out) > 1 else tuple(out)
        memo = cmemo[o]
        if memo is None:
            memo = cmemo[o] = {}
        memo[x] = got
        return got

    def is_complete(self, c: int) -> bool:
        if c == 0:
            return self.auto.start in self.auto.nullable
        lacc = self.lacc
        for it in self.kern[c]:
            if it <= MASK and lacc[it]:  # origin 0 and completes the start symbol
                return True
        return False

    def allowed_terminals(self, c: int) -> frozenset[str]:
        got = self.allowed[c]
        if got is None:
            sobj = self.sobj
            parts = [sobj[lid].tnames for lid in {it & MASK for it in self.kern[c]}]
            if self.pred[c] >= 0:
                parts.append(sobj[self.pred[c]].tnames)
            got = frozenset().union(*parts)
            self.allowed[c] = got
        return got


class State:
    """A persistent recognizer state: a handle ``(chart store, chart number)``.

    Charts are never mutated after creation except for memo tables, so a state is safe to keep
    and to scan many different terminals from; equal handles denote the same chart.
    """

    __slots__ = ("_charts", "_index")

    def __init__(self, charts: _Charts, index: int) -> None:
        self._charts = charts
        self._index = index

    def scan(self, terminal: str) -> State | None:
        """The state after `terminal`, or ``None`` when no sentence starts so.

        Raises ``KeyError`` naming `terminal` when the grammar does not know it.
        """
        charts = self._charts
        sid = charts.auto.terminal_ids.get(terminal)
        if sid is None:
            raise KeyError(f"unknown terminal {terminal!r}")
        c = self._index
        nxt = charts.nxt[c].get(sid)
        if nxt is None:
            nxt = charts.step(c, sid)
        return State(charts, nxt) if nxt >= 0 else None

    def scan_many(self, terminals: Iterable[str]) -> State | None:
        """The state after all of `terminals` in order, or ``None`` once no sentence starts so."""
        charts = self._charts
        ids = charts.auto.terminal_ids
        nxt_rows = charts.nxt
        step = charts.step
        c = self._index
        for name in terminals:
            sid = ids.get(name)
            if sid is None:
                raise KeyError(f"unknown terminal {name!r}")
            n = nxt_rows[c].get(sid)
            if n is None:
                n = step(c, sid)
            if n < 0:
                return None
            c = n
        return State(charts, c)

    def is_complete(self) -> bool:
        """True iff the input scanned so far is a sentence of the grammar."""
        return self._charts.is_complete(self._index)

    def allowed_terminals(self) -> frozenset[str]:
        """The terminals that `scan` accepts from this state."""
        return self._charts.allowed_terminals(self._index)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, State)
            and other._charts is self._charts
            and other._index == self._index
        )

    def __hash__(self) -> int:
        return hash((id(self._charts), self._index))

    def __repr__(self) -> str:
        return f"<quotient.fast.State chart={self._index}>"


def recognizer(grammar: Grammar) -> State:
    """A fresh recognizer state for the empty input over `grammar`.

    Each call gets its own chart storage (so memo tables of one request do not outlive it);
    the DFA is shared through `quotient.lr0.automaton`.
    """
    return State(_Charts(automaton(grammar)), 0)
