"""Context-free grammars in BNF, with a stable integer encoding of symbols and rules.

A `Grammar` is a list of productions ``(lhs, rhs)`` over symbol names plus a start symbol.
Terminal names form the alphabet the recognizer scans; their lexical definitions
(`TerminalDef`) are carried along for the lexer but the engine never looks at them.

Integer encoding (used by the recognizers, kept stable so tables can be shared):
terminals get ids ``0 .. n_terminals-1`` and nonterminals the ids after them, in order of first
definition; rule ``i`` is ``rule_table[i] == (lhs_id, rhs_ids)`` and ``rules_by_lhs[sym_id]``
lists the rule ids of a nonterminal. `Grammar.with_rules` extends a grammar with rules for
*new* nonterminals only: the base's ids, rule ids and derived sets stay valid, and the new
grammar records the base in ``g.base`` so compiled tables can be extended instead of rebuilt.

A grammar knows nothing of the algorithms that run on it: its derived sets and item tables
are one `GrammarAnalysis` (``g.analysis``), and recognizers and quotients are functions of the
package (`quotient.recognizer`, `quotient.right_quotient`, ...) that take a grammar.
"""

from __future__ import annotations

import threading
from collections import ChainMap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .analysis import GrammarAnalysis
from .errors import GrammarError

Rule = tuple[str, tuple[str, ...]]
#: Held while a grammar's analysis is computed (re-entered for an extension's base).
_ANALYSING = threading.RLock()


@dataclass(frozen=True)
class TerminalDef:
    """Lexical definition of a terminal, as lark compiled it."""

    name: str
    kind: str  # "str" (literal text) or "re" (a regular expression)
    pattern: str
    flags: tuple[str, ...] = ()
    priority: int = 0


def _rule_text(lhs: str, rhs: Sequence[str]) -> str:
    return f"{lhs} -> {' '.join(rhs) if rhs else '<empty>'}"


class Grammar:
    """An immutable context-free grammar over terminal names (see the module docstring)."""

    def __init__(
        self,
        rules: Iterable[tuple[str, Sequence[str]]],
        start: str,
        terminals: Iterable[str] | None = None,
        *,
        terminal_defs: Mapping[str, TerminalDef] | None = None,
        ignored: Iterable[str] = (),
        declared: Iterable[str] = (),
    ) -> None:
        rule_list: list[Rule] = [(str(lhs), tuple(str(s) for s in rhs)) for lhs, rhs in rules]
        lhs_names = list(dict.fromkeys(lhs for lhs, _ in rule_list))
        lhs_set = set(lhs_names)
        if terminals is None:
            # Every right-hand-side symbol that no rule defines is a terminal.
            term_names = list(
                dict.fromkeys(s for _, rhs in rule_list for s in rhs if s not in lhs_set)
            )
        else:
            term_names = list(dict.fromkeys(terminals))
            term_set = set(term_names)
            both = term_set & lhs_set
            if both:
                name = sorted(both)[0]
                raise GrammarError(f"symbol {name!r} is both a terminal and a rule's left side")
            for lhs, rhs in rule_list:
                for sym in rhs:
                    if sym not in lhs_set and sym not in term_set:
                        raise GrammarError(
                            f"undefined symbol {sym!r} in rule {_rule_text(lhs, rhs)}"
                        )
        if start in set(term_names):
            raise GrammarError(f"start symbol {start!r} is a terminal")
        # A start symbol without rules is allowed: it denotes the empty language.
        nt_names = lhs_names if start in lhs_set else lhs_names + [start]
        names = term_names + nt_names
        ids = {n: i for i, n in enumerate(names)}
        table = [(ids[lhs], tuple(ids[s] for s in rhs)) for lhs, rhs in rule_list]
        by_lhs: list[list[int]] = [[] for _ in names]
        for rid, (lhs_id, _) in enumerate(table):
            by_lhs[lhs_id].append(rid)
        self._assign(
            rules=rule_list, symbol_names=names, symbol_ids=ids, n_terminals=len(term_names),
            rule_table=table, rules_by_lhs=[tuple(r) for r in by_lhs], start_id=ids[start],
            terminal_defs=dict(terminal_defs or {}), ignored=frozenset(ignored),
            declared=frozenset(declared), base=None,
        )

    def _assign(
        self,
        *,
        rules: list[Rule],
        symbol_names: list[str],
        symbol_ids: Mapping[str, int],
        n_terminals: int,
        rule_table: list[tuple[int, tuple[int, ...]]],
        rules_by_lhs: list[tuple[int, ...]],
        start_id: int,
        terminal_defs: dict[str, TerminalDef],
        ignored: frozenset[str],
        declared: frozenset[str],
        base: Grammar | None,
        productive: frozenset[int] | None = None,
    ) -> None:
        """Set every field; the one place a grammar's state is written."""
        self.rules: list[Rule] = rules
        self.symbol_names: list[str] = symbol_names
        self.symbol_ids: Mapping[str, int] = symbol_ids
        self.n_terminals: int = n_terminals
        self.rule_table: list[tuple[int, tuple[int, ...]]] = rule_table
        self.rules_by_lhs: list[tuple[int, ...]] = rules_by_lhs
        self.start_id: int = start_id
        self.start: str = symbol_names[start_id]
        self.terminal_defs: dict[str, TerminalDef] = terminal_defs
        self.ignored: frozenset[str] = ignored
        self.declared: frozenset[str] = declared
        self.base: Grammar | None = base
        self.n_base_rules: int = len(base.rule_table) if base is not None else 0
        # Computed on first use (each by this module only):
        self._productive_hint = productive
        self._analysis: GrammarAnalysis | None = None
        self._reversed: Grammar | None = None
        self._pruned: Grammar | None = None
        self._productive_part: Grammar | None = None
        self._terminals: frozenset[str] | None = None
        self._nonterminals: frozenset[str] | None = None
        self._nullable_names: frozenset[str] | None = None

    @classmethod
    def _assembled(cls, **fields: Any) -> Grammar:
        """A grammar from an encoding the caller guarantees valid (see `_assign`)."""
        g = cls.__new__(cls)
        g._assign(**fields)
        return g

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_lark(cls, text: str, start: str = "start") -> Grammar:
        """Load a lark grammar with lark's own loader and expand it to BNF.

        EBNF operators, groups, templates and anonymous string terminals are expanded by lark
        (anonymous terminals keep lark's names, e.g. ``LPAR``, ``DEF``, ``__ANON_0``). Rules
        that lark would inline in its trees (``_rule``, ``?rule``) and aliases do not change the
        language, so they stay ordinary nonterminals here. Errors in the grammar text, including
        undefined symbols, raise `GrammarError`.
        """
        from lark.exceptions import LarkError
        from lark.load_grammar import GrammarBuilder

        try:
            builder = GrammarBuilder(False, None)
            builder.load_grammar(text, "<grammar>")
            lark_grammar = builder.build()
            rule_names = {name for name, _p, _t, _o in lark_grammar.rule_defs}
            if start not in rule_names:
                raise GrammarError(f"start symbol {start!r} is not a rule of the grammar")
            declared = [n for n, (tree, _p) in lark_grammar.term_defs if tree is None]
            terms, lark_rules, ignore = lark_grammar.compile([start], "*")
        except LarkError as exc:
            raise GrammarError(str(exc)) from exc
        except AssertionError as exc:  # lark reports a few malformed inputs by assertion
            raise GrammarError(f"lark rejected the grammar: {exc}") from exc
        # Lark's compiled terminals and rules come in an order that depends on string hashing
        # (it differs between processes); sorted, a grammar numbers its symbols and rules the
        # same in every process, which is what lets a built language travel between them
        # (``quotient.transfer``).
        terms = sorted(terms, key=lambda t: str(t.name))
        defs = {
            str(t.name): TerminalDef(
                str(t.name),
                t.pattern.type,
                t.pattern.value,
                tuple(t.pattern.flags),
                int(t.priority),
            )
            for t in terms
        }
        rules = sorted(
            (str(r.origin.name), tuple(str(s.name) for s in r.expansion)) for r in lark_rules
        )
        terminal_names = list(defs) + [n for n in declared if n not in defs]
        return cls(
            rules,
            start,
            terminal_names,
            terminal_defs=defs,
            ignored=[str(n) for n in ignore],
            declared=declared,
        )

    def with_rules(self, extra_rules: Iterable[tuple[str, Sequence[str]]], start: str | None = None
                   ) -> Grammar:
        """This grammar plus rules whose left sides are new nonterminals.

        Nothing about the base is recomputed: its ids stay valid, its name table is shared
        (layered under the new names), derived sets (nullable, productive, recognizer tables)
        are extended from the base's over the new rules only. The only base-sized work is a
        flat copy of the id lists (``symbol_names``, ``rule_table``, ...), a C-level memcpy.
        `start` defaults to the base's start; it may name a new nonterminal without rules
        (the empty language).
        """
        extra: list[Rule] = [(str(lhs), tuple(str(s) for s in rhs)) for lhs, rhs in extra_rules]
        old_ids = self.symbol_ids
        new_names = list(dict.fromkeys(lhs for lhs, _ in extra))
        for name in new_names:
            if name in old_ids:
                raise GrammarError(
                    f"with_rules: {name!r} is already a symbol of the base grammar"
                )
        start = self.start if start is None else start
        if start not in old_ids and start not in new_names:
            new_names.append(start)
        if start in old_ids and old_ids[start] < self.n_terminals:
            raise GrammarError(f"start symbol {start!r} is a terminal")
        first = len(self.symbol_names)
        new_ids = {n: first + i for i, n in enumerate(new_names)}
        new_table: list[tuple[int, tuple[int, ...]]] = []
        for lhs, rhs in extra:
            try:
                new_table.append((new_ids[lhs], tuple(
                    new_ids[s] if s in new_ids else old_ids[s] for s in rhs)))
            except KeyError as exc:
                raise GrammarError(
                    f"undefined symbol {exc.args[0]!r} in rule {_rule_text(lhs, rhs)}"
                ) from None
        start_id = new_ids[start] if start in new_ids else old_ids[start]
        return self._extended(new_names, new_table, start_id, extra, None, first)

    def with_encoded_rules(
        self,
        new_names: list[str],
        new_table: list[tuple[int, tuple[int, ...]]],
        start_id: int,
        *,
        productive: Iterable[int] | None = None,
    ) -> Grammar:
        """`with_rules` on encoded input, for engine modules that build rules as ids.

        `new_names` get the ids after this grammar's symbols; `new_table` holds
        ``(lhs_id, rhs_ids)`` rules whose left sides are among them. `productive`, if given,
        is the exact set of productive nonterminals of the result (a quotient knows it by
        construction), which spares the analysis that fixpoint. Right sides are not checked.
        """
        first = len(self.symbol_names)
        names = self.symbol_names + new_names
        for lhs, _ in new_table:
            if not first <= lhs < len(names):
                raise GrammarError(f"with_encoded_rules: a rule for {names[lhs]!r}, which is "
                                   "not a new nonterminal")
        named_rules = [(names[lhs], tuple(names[s] for s in rhs)) for lhs, rhs in new_table]
        return self._extended(new_names, new_table, start_id, named_rules,
                              None if productive is None else frozenset(productive), first)

    def _extended(self, new_names: list[str], new_table: list[tuple[int, tuple[int, ...]]],
                  start_id: int, named_rules: list[Rule], productive: frozenset[int] | None,
                  first: int) -> Grammar:
        by_lhs: list[list[int]] = [[] for _ in new_names]
        n_old_rules = len(self.rule_table)
        for i, (lhs_id, _) in enumerate(new_table):
            by_lhs[lhs_id - first].append(n_old_rules + i)
        old_ids = self.symbol_ids
        new_ids = {n: first + i for i, n in enumerate(new_names)}
        # Share the base's name table instead of copying it (one flat chain of layers).
        layers = old_ids.maps if isinstance(old_ids, ChainMap) else [old_ids]
        return Grammar._assembled(
            rules=self.rules + named_rules,
            symbol_names=self.symbol_names + new_names,
            symbol_ids=ChainMap(new_ids, *layers),
            n_terminals=self.n_terminals,
            rule_table=self.rule_table + new_table,
            rules_by_lhs=self.rules_by_lhs + [tuple(r) for r in by_lhs],
            start_id=start_id,
            terminal_defs=self.terminal_defs,
            ignored=self.ignored,
            declared=self.declared,
            base=self,
            productive=productive,
        )

    # ----------------------------------------------------------------- derived facts

    @property
    def analysis(self) -> GrammarAnalysis:
        """Nullable, productive and usable sets and the item tables (computed once).

        Computed under a lock: two threads that each made one would give an extension's
        automaton a base analysis other than its base automaton's (``quotient.lr0``)."""
        if self._analysis is None:
            with _ANALYSING:
                if self._analysis is None:
                    base = self.base.analysis if self.base is not None else None
                    self._analysis = GrammarAnalysis(
                        self.symbol_names, self.n_terminals, self.rule_table,
                        self.start_id, base=base, productive=self._productive_hint,
                    )
        return self._analysis

    @property
    def terminals(self) -> frozenset[str]:
        """Names of the terminals (the alphabet)."""
        if self._terminals is None:
            self._terminals = frozenset(self.symbol_names[: self.n_terminals])
        return self._terminals

    @property
    def nonterminals(self) -> frozenset[str]:
        """Names of the nonterminals."""
        if self._nonterminals is None:
            self._nonterminals = frozenset(self.symbol_names[self.n_terminals :])
        return self._nonterminals

    @property
    def nullable(self) -> frozenset[str]:
        """Names of the nullable nonterminals."""
        if self._nullable_names is None:
            names = self.symbol_names
            self._nullable_names = frozenset(names[i] for i in self.analysis.nullable)
        return self._nullable_names

    def is_productive_symbol(self, name: str) -> bool:
        """True for terminals and for nonterminals that derive some terminal string."""
        sid = self.symbol_ids[name]
        return sid < self.n_terminals or sid in self.analysis.productive

    # ----------------------------------------------------------------- transformations

    def _copy_with_rules(self, rules: Iterable[tuple[str, Sequence[str]]]) -> Grammar:
        return Grammar(
            rules,
            self.start,
            self.symbol_names[: self.n_terminals],
            terminal_defs=self.terminal_defs,
            ignored=self.ignored,
            declared=self.declared,
        )

    def reversed(self) -> Grammar:
        """The grammar of the reversed language: every right-hand side reversed.

        Symbol and rule ids are the same as in this grammar (the quotient extraction relies on
        it); the result is a standalone grammar (no ``base``) whose reverse is this one."""
        if self._reversed is None:
            rev = Grammar._assembled(
                rules=[(lhs, rhs[::-1]) for lhs, rhs in self.rules],
                symbol_names=list(self.symbol_names),
                symbol_ids=dict(self.symbol_ids),
                n_terminals=self.n_terminals,
                rule_table=[(lhs, rhs[::-1]) for lhs, rhs in self.rule_table],
                rules_by_lhs=list(self.rules_by_lhs),
                start_id=self.start_id,
                terminal_defs=self.terminal_defs,
                ignored=self.ignored,
                declared=self.declared,
                base=None,
                productive=self.analysis.productive,  # reversal keeps it
            )
            rev._reversed = self
            self._reversed = rev
        return self._reversed

    def pruned(self) -> Grammar:
        """The same language without unproductive or unreachable nonterminals and rules.

        Returns ``self`` when nothing needs removing.
        """
        if self._pruned is not None:
            return self._pruned
        usable = self.analysis.usable_rules()
        by_lhs: dict[int, list[int]] = {}
        for rid in usable:
            by_lhs.setdefault(self.rule_table[rid][0], []).append(rid)
        n_t = self.n_terminals
        reach = {self.start_id}
        stack = [self.start_id]
        while stack:
            for rid in by_lhs.get(stack.pop(), ()):
                for s in self.rule_table[rid][1]:
                    if s >= n_t and s not in reach:
                        reach.add(s)
                        stack.append(s)
        keep = [rid for rid in usable if self.rule_table[rid][0] in reach]
        if len(keep) == len(self.rule_table):
            self._pruned = self
        else:
            self._pruned = self._copy_with_rules(self.rules[rid] for rid in keep)
            self._pruned._pruned = self._pruned
        return self._pruned

    def productive_part(self) -> Grammar:
        """This grammar without its unusable rules (those using unproductive symbols);
        unreachable rules are kept.

        Returns ``self`` when every rule is usable. The quotient operations work on this
        grammar so that Earley's prefix property holds for their results.
        """
        if self._productive_part is None:
            usable = self.analysis.usable_rules()
            if len(usable) == len(self.rule_table):
                self._productive_part = self
            else:
                self._productive_part = self._copy_with_rules(self.rules[rid] for rid in usable)
        return self._productive_part

    # ----------------------------------------------------------------- display

    def __repr__(self) -> str:
        return (
            f"Grammar(start={self.start!r}, {len(self.rules)} rules, "
            f"{self.n_terminals} terminals)"
        )
