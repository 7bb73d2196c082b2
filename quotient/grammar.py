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
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import fast
from .errors import GrammarError

if TYPE_CHECKING:
    from .nfa import Nfa

Rule = tuple[str, tuple[str, ...]]


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

        self.start: str = start
        self.rules: list[Rule] = rule_list
        self.terminal_defs: dict[str, TerminalDef] = dict(terminal_defs or {})
        self.ignored: frozenset[str] = frozenset(ignored)
        self.declared: frozenset[str] = frozenset(declared)
        self.base: Grammar | None = None
        self.n_base_rules: int = 0

        self.symbol_names: list[str] = term_names + nt_names
        self.symbol_ids: Mapping[str, int] = {n: i for i, n in enumerate(self.symbol_names)}
        self.n_terminals: int = len(term_names)
        ids = self.symbol_ids
        self.rule_table: list[tuple[int, tuple[int, ...]]] = [
            (ids[lhs], tuple(ids[s] for s in rhs)) for lhs, rhs in rule_list
        ]
        by_lhs: list[list[int]] = [[] for _ in self.symbol_names]
        for rid, (lhs_id, _) in enumerate(self.rule_table):
            by_lhs[lhs_id].append(rid)
        self.rules_by_lhs: list[tuple[int, ...]] = [tuple(r) for r in by_lhs]
        self.start_id: int = ids[start]
        self._cache: dict[str, Any] = {}

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
        rules = [
            (str(r.origin.name), tuple(str(s.name) for s in r.expansion)) for r in lark_rules
        ]
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
        return self._extended(new_names, new_table, start_id, extra)

    def _extended(self, new_names: list[str], new_table: list[tuple[int, tuple[int, ...]]],
                  start_id: int, named_rules: list[Rule] | None = None) -> Grammar:
        """`with_rules` on encoded input: `new_names` get the ids after the base's symbols,
        `new_table` holds ``(lhs_id, rhs_ids)`` rules whose left sides are new ids. Nothing is
        checked; callers guarantee the encoding is valid."""
        first = len(self.symbol_names)
        names = self.symbol_names + new_names
        if named_rules is None:
            named_rules = [(names[lhs], tuple(names[s] for s in rhs)) for lhs, rhs in new_table]
        by_lhs: list[list[int]] = [[] for _ in new_names]
        n_old_rules = len(self.rule_table)
        for i, (lhs_id, _) in enumerate(new_table):
            by_lhs[lhs_id - first].append(n_old_rules + i)
        old_ids = self.symbol_ids
        new_ids = {n: first + i for i, n in enumerate(new_names)}
        # Share the base's name table instead of copying it (one flat chain of layers).
        layers = old_ids.maps if isinstance(old_ids, ChainMap) else [old_ids]

        g = Grammar.__new__(Grammar)
        g.start = names[start_id]
        g.rules = self.rules + named_rules
        g.terminal_defs = self.terminal_defs
        g.ignored = self.ignored
        g.declared = self.declared
        g.base = self
        g.n_base_rules = n_old_rules
        g.symbol_names = names
        g.symbol_ids = ChainMap(new_ids, *layers)
        g.n_terminals = self.n_terminals
        g.rule_table = self.rule_table + new_table
        g.rules_by_lhs = self.rules_by_lhs + [tuple(r) for r in by_lhs]
        g.start_id = start_id
        g._cache = {}
        return g

    # ----------------------------------------------------------------- symbol sets

    @property
    def terminals(self) -> frozenset[str]:
        """Names of the terminals (the alphabet)."""
        if "terminals" not in self._cache:
            self._cache["terminals"] = frozenset(self.symbol_names[: self.n_terminals])
        return self._cache["terminals"]

    @property
    def nonterminals(self) -> frozenset[str]:
        """Names of the nonterminals."""
        if "nonterminals" not in self._cache:
            self._cache["nonterminals"] = frozenset(self.symbol_names[self.n_terminals :])
        return self._cache["nonterminals"]

    def _fixpoint(self, key: str, seed: frozenset[int], first_rule: int) -> frozenset[int]:
        """Least set S containing `seed` and every lhs of a rule (id >= first_rule) whose rhs
        lies in S ∪ terminals-if-productive. Shared by nullable and productive sets."""
        productive = key == "productive"
        n_t = self.n_terminals
        found = set(seed)
        # Index rules by the symbols they still wait for, so each rule is revisited only when
        # one of its missing symbols becomes known (linear time).
        missing: list[int] = []
        users: dict[int, list[int]] = {}
        queue: list[int] = []
        table = self.rule_table
        for rid in range(first_rule, len(table)):
            lhs, rhs = table[rid]
            need = 0
            for s in rhs:
                if s < n_t:
                    if productive:
                        continue
                    need = -1  # a terminal is never nullable: this rule never counts
                    break
                if s not in found:
                    need += 1
                    users.setdefault(s, []).append(len(missing))
            missing.append(need)
            if need == 0 and lhs not in found:
                found.add(lhs)
                queue.append(lhs)
        lhs_of = [table[r][0] for r in range(first_rule, len(table))]
        while queue:
            sym = queue.pop()
            for idx in users.pop(sym, ()):
                if missing[idx] > 0:
                    missing[idx] -= 1
                    if missing[idx] == 0 and lhs_of[idx] not in found:
                        found.add(lhs_of[idx])
                        queue.append(lhs_of[idx])
        return frozenset(found)

    def _derived_ids(self, key: str) -> frozenset[int]:
        if key not in self._cache:
            if self.base is not None:
                seed = self.base._derived_ids(key)
                self._cache[key] = self._fixpoint(key, seed, self.n_base_rules)
            else:
                self._cache[key] = self._fixpoint(key, frozenset(), 0)
        return self._cache[key]

    @property
    def nullable_ids(self) -> frozenset[int]:
        """Ids of the nullable nonterminals."""
        return self._derived_ids("nullable")

    @property
    def productive_ids(self) -> frozenset[int]:
        """Ids of the productive nonterminals (those deriving at least one terminal string)."""
        return self._derived_ids("productive")

    @property
    def nullable(self) -> frozenset[str]:
        """Names of the nullable nonterminals."""
        if "nullable_names" not in self._cache:
            names = self.symbol_names
            self._cache["nullable_names"] = frozenset(names[i] for i in self.nullable_ids)
        return self._cache["nullable_names"]

    def is_productive_symbol(self, name: str) -> bool:
        """True for terminals and for nonterminals that derive some terminal string."""
        sid = self.symbol_ids[name]
        return sid < self.n_terminals or sid in self.productive_ids

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
        it); the result is a standalone grammar (no ``base``)."""
        if "reversed" not in self._cache:
            rev = Grammar.__new__(Grammar)
            rev.start = self.start
            rev.rules = [(lhs, rhs[::-1]) for lhs, rhs in self.rules]
            rev.terminal_defs = self.terminal_defs
            rev.ignored = self.ignored
            rev.declared = self.declared
            rev.base = None
            rev.n_base_rules = 0
            rev.symbol_names = list(self.symbol_names)
            rev.symbol_ids = dict(self.symbol_ids)
            rev.n_terminals = self.n_terminals
            rev.rule_table = [(lhs, rhs[::-1]) for lhs, rhs in self.rule_table]
            rev.rules_by_lhs = list(self.rules_by_lhs)
            rev.start_id = self.start_id
            rev._cache = {
                "reversed": self,
                "productive": self.productive_ids,  # reversal keeps both sets
                "nullable": self.nullable_ids,
            }
            self._cache["reversed"] = rev
        return self._cache["reversed"]

    def pruned(self) -> Grammar:
        """The same language without unproductive or unreachable nonterminals and rules.

        Returns ``self`` when nothing needs removing.
        """
        if "pruned" in self._cache:
            return self._cache["pruned"]
        prod = self.productive_ids
        n_t = self.n_terminals
        keep = [
            rid
            for rid, (lhs, rhs) in enumerate(self.rule_table)
            if lhs in prod and all(s < n_t or s in prod for s in rhs)
        ]
        by_lhs: dict[int, list[int]] = {}
        for rid in keep:
            by_lhs.setdefault(self.rule_table[rid][0], []).append(rid)
        reach = {self.start_id}
        stack = [self.start_id]
        while stack:
            sym = stack.pop()
            for rid in by_lhs.get(sym, ()):
                for s in self.rule_table[rid][1]:
                    if s >= n_t and s not in reach:
                        reach.add(s)
                        stack.append(s)
        keep = [rid for rid in keep if self.rule_table[rid][0] in reach]
        if len(keep) == len(self.rule_table):
            result = self
        else:
            result = self._copy_with_rules(self.rules[rid] for rid in keep)
            result._cache["pruned"] = result
        self._cache["pruned"] = result
        return result

    def productive_part(self) -> Grammar:
        """This grammar without rules that use unproductive symbols (reachability kept).

        Returns ``self`` when every rule is usable. The quotient operations work on this
        grammar so that Earley's prefix property holds for their results.
        """
        if "productive_part" in self._cache:
            return self._cache["productive_part"]
        prod = self.productive_ids
        n_t = self.n_terminals
        ok = all(
            lhs in prod and all(s < n_t or s in prod for s in rhs) for lhs, rhs in self.rule_table
        )
        if ok:
            result = self
        else:
            result = self._copy_with_rules(
                rule
                for rule, (lhs, rhs) in zip(self.rules, self.rule_table, strict=True)
                if lhs in prod and all(s < n_t or s in prod for s in rhs)
            )
        self._cache["productive_part"] = result
        return result

    # ----------------------------------------------------------------- engine entry points

    def recognizer(self) -> fast.State:
        """Recognizer state for the empty input (a persistent handle into shared charts)."""
        return fast.recognizer(self)

    def left_quotient(self, x: Sequence[str] | Nfa) -> Grammar:
        """Grammar of ``{u : w·u ∈ L(self)}`` for w a terminal list or any word of an `Nfa`."""
        from .quotients import left_quotient

        return left_quotient(self, x)

    def right_quotient(self, x: Sequence[str] | Nfa) -> Grammar:
        """Grammar of ``{u : u·w ∈ L(self)}`` for w a terminal list or any word of an `Nfa`."""
        from .quotients import right_quotient

        return right_quotient(self, x)

    def right_quotient_split(self, rev_nfa: Nfa) -> tuple[Grammar, dict[int, str | None]]:
        """One reversed parse of `rev_nfa`; a start nonterminal per final state (see
        docs/INTERFACES.md)."""
        from .quotients import right_quotient_split

        return right_quotient_split(self, rev_nfa)

    # ----------------------------------------------------------------- display

    def __repr__(self) -> str:
        return (
            f"Grammar(start={self.start!r}, {len(self.rules)} rules, "
            f"{self.n_terminals} terminals)"
        )

    def to_text(self) -> str:
        """The rules, one per line (for debugging and error messages)."""
        return "\n".join(_rule_text(lhs, rhs) for lhs, rhs in self.rules)
