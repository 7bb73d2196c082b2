"""Nondeterministic finite automata over terminal names, the input of the Earley recognizer.

States are the integers ``0 .. n_states-1``; an `Nfa` has symbol edges, epsilon edges, one
start state and any number of final states. The combinators (`union`, `concat`, `repeat`,
`reversed`) build new automata and never modify their operands. `reversed` keeps the state
numbers of the original (adding one fresh start state when there are several finals), which
lets callers relate charts of a reversed parse to states they built.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any


class _class_or_instance:
    """Method usable as ``Nfa.union(a, b)`` and as ``a.union(b)`` (then ``a`` comes first)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        functools.update_wrapper(self, func)  # type: ignore[arg-type]

    def __get__(self, obj: object, owner: type | None = None) -> Callable[..., Any]:
        return self.func if obj is None else functools.partial(self.func, obj)


class Nfa:
    """A nondeterministic finite automaton with epsilon edges (see the module docstring)."""

    __slots__ = ("edges", "eps", "start", "finals")

    def __init__(self, n_states: int = 1, start: int = 0, finals: Iterable[int] = ()) -> None:
        if n_states < 1:
            raise ValueError("an Nfa needs at least one state")
        self.edges: list[list[tuple[str, int]]] = [[] for _ in range(n_states)]
        self.eps: list[list[int]] = [[] for _ in range(n_states)]
        self.start = start
        self.finals: set[int] = set(finals)
        self._check(start)
        for f in self.finals:
            self._check(f)

    # ----------------------------------------------------------------- building

    @property
    def n_states(self) -> int:
        return len(self.edges)

    def _check(self, state: int) -> None:
        if not 0 <= state < len(self.edges):
            raise ValueError(f"no state {state} in an Nfa with {len(self.edges)} states")

    def add_state(self, final: bool = False) -> int:
        """Add a state and return its number."""
        self.edges.append([])
        self.eps.append([])
        state = len(self.edges) - 1
        if final:
            self.finals.add(state)
        return state

    def add_edge(self, src: int, symbol: str, dst: int) -> None:
        """Add a transition on terminal `symbol`."""
        self._check(src)
        self._check(dst)
        self.edges[src].append((symbol, dst))

    def add_epsilon(self, src: int, dst: int) -> None:
        """Add an epsilon transition."""
        self._check(src)
        self._check(dst)
        self.eps[src].append(dst)

    @classmethod
    def empty(cls) -> Nfa:
        """The automaton of the empty language."""
        return cls(1)

    @classmethod
    def epsilon(cls) -> Nfa:
        """The automaton accepting only the empty word."""
        return cls(1, 0, [0])

    @classmethod
    def from_symbols(cls, symbols: Sequence[str]) -> Nfa:
        """The automaton accepting exactly the word `symbols` (a chain of states)."""
        n = len(symbols)
        a = cls(n + 1, 0, [n])
        for i, sym in enumerate(symbols):
            a.edges[i].append((sym, i + 1))
        return a

    def copy(self) -> Nfa:
        a = Nfa.__new__(Nfa)
        a.edges = [list(e) for e in self.edges]
        a.eps = [list(e) for e in self.eps]
        a.start = self.start
        a.finals = set(self.finals)
        return a

    def _embed(self, into: Nfa) -> int:
        """Append a copy of this automaton's states to `into`; return the offset."""
        off = len(into.edges)
        into.edges.extend([(s, d + off) for s, d in e] for e in self.edges)
        into.eps.extend([d + off for d in e] for e in self.eps)
        return off

    # ----------------------------------------------------------------- combinators

    @_class_or_instance
    def union(*automata: Nfa) -> Nfa:
        """Automaton of the union of the languages: ``Nfa.union(a, b, ...)`` or
        ``a.union(b, ...)``."""
        out = Nfa(1)
        for a in automata:
            off = a._embed(out)
            out.eps[0].append(a.start + off)
            out.finals.update(f + off for f in a.finals)
        return out

    def concat(self, other: Nfa) -> Nfa:
        """Automaton of ``L(self)·L(other)``."""
        out = self.copy()
        off = other._embed(out)
        for f in self.finals:
            out.eps[f].append(other.start + off)
        out.finals = {f + off for f in other.finals}
        return out

    def repeat(self, m: int, n: int | None = None) -> Nfa:
        """Automaton of ``m`` to ``n`` repetitions (``n=None``: unbounded)."""
        if m < 0 or (n is not None and n < m):
            raise ValueError(f"bad repetition bounds {m}..{n}")
        out = Nfa.epsilon()
        for _ in range(m):
            out = out.concat(self)
        if n is None:
            star = Nfa(1, 0, [0])
            off = self._embed(star)
            star.eps[0].append(self.start + off)
            for f in self.finals:
                star.eps[f + off].append(0)
            return out.concat(star)
        optional = Nfa.union(self, Nfa.epsilon())
        for _ in range(n - m):
            out = out.concat(optional)
        return out

    def reversed(self) -> Nfa:
        """Automaton of the reversed language.

        Every state keeps its number; the original start becomes the only final. With one
        final state that state becomes the start, otherwise a fresh start state (numbered
        ``n_states``) has epsilon edges to the old finals.
        """
        n = len(self.edges)
        out = Nfa(n, 0, ())
        for src, row in enumerate(self.edges):
            for sym, dst in row:
                out.edges[dst].append((sym, src))
        for src, row in enumerate(self.eps):
            for dst in row:
                out.eps[dst].append(src)
        out.finals = {self.start}
        if len(self.finals) == 1:
            out.start = next(iter(self.finals))
        else:
            out.start = out.add_state()
            out.eps[out.start].extend(sorted(self.finals))
        return out

    # ----------------------------------------------------------------- queries

    def epsilon_closure(self, states: Iterable[int]) -> set[int]:
        """States reachable from `states` by epsilon edges (including themselves)."""
        seen = set(states)
        stack = list(seen)
        eps = self.eps
        while stack:
            for d in eps[stack.pop()]:
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        return seen

    def symbols(self) -> set[str]:
        """The terminal names on the automaton's edges."""
        return {sym for row in self.edges for sym, _ in row}

    def __repr__(self) -> str:
        n_edges = sum(len(r) for r in self.edges)
        return f"Nfa({self.n_states} states, {n_edges} edges, start={self.start}, " \
               f"finals={sorted(self.finals)})"
