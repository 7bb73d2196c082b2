"""What both recognizers need to know about a grammar, computed once per grammar.

`GrammarAnalysis` derives, from a grammar's integer encoding (see `quotient.grammar`):

* the **nullable** and **productive** nonterminals (least fixpoints, linear time);
* which rules are **usable**: the left side and every symbol of the right side productive.
  Only usable rules are ever predicted. An unusable rule can never finish a sentence, and
  leaving it out is what gives both recognizers Earley's prefix property (a state that scanned
  ``u`` exists only if ``u`` extends to a sentence); the grammar's `pruned` and
  `productive_part` drop exactly the unusable rules too;
* the **dotted items**: rule ``r`` with ``n`` right-hand symbols owns the consecutive item ids
  ``rule_first[r] .. rule_first[r] + n`` (dot before the first symbol .. dot at the end), so
  advancing the dot is ``+1``; ``item_next[i]`` is the symbol after the dot (-1 at the end);
* per nonterminal, the first items of its usable rules (``predict``);
* on first use, FIRST sets as terminal bit masks (only the NFA parse's lookahead needs them).

An extension grammar (``Grammar.with_rules``) only adds rules for new nonterminals, so its
analysis starts from its base's: base ids and items stay valid, and the fixpoints and item
tables are only extended over the new rules. The reference recognizer (`quotient.earley`,
`quotient.nfa_charts`) and the fast one (`quotient.fast`) read the same object, so the two can
never disagree about what is nullable or usable. The model is lark's `grammar_analysis.py`,
which computes such sets once for its parser generators.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from .keys import MASK

RuleTable = Sequence[tuple[int, tuple[int, ...]]]


def least_fixpoint(table: RuleTable, first_rule: int, n_terminals: int, seed: Iterable[int],
              terminals_count: bool) -> frozenset[int]:
    """Least set S ⊇ `seed` holding the left side of every rule (id >= `first_rule`) whose
    right side lies in S, plus the terminals when `terminals_count` (productive) or nothing
    else (nullable: a rule with a terminal never counts)."""
    found = set(seed)
    # Rules are indexed by the symbols they still wait for, so each rule is revisited only
    # when one of its missing symbols becomes known (linear time).
    missing: list[int] = []
    lhs_of: list[int] = []
    users: dict[int, list[int]] = {}
    queue: list[int] = []
    for rid in range(first_rule, len(table)):
        lhs, rhs = table[rid]
        need = 0
        for s in rhs:
            if s < n_terminals:
                if terminals_count:
                    continue
                need = -1  # never nullable
                break
            if s not in found:
                need += 1
                users.setdefault(s, []).append(len(missing))
        missing.append(need)
        lhs_of.append(lhs)
        if need == 0 and lhs not in found:
            found.add(lhs)
            queue.append(lhs)
    while queue:
        for idx in users.pop(queue.pop(), ()):
            if missing[idx] > 0:
                missing[idx] -= 1
                if missing[idx] == 0 and lhs_of[idx] not in found:
                    found.add(lhs_of[idx])
                    queue.append(lhs_of[idx])
    return frozenset(found)


class GrammarAnalysis:
    """Derived sets and item tables of one grammar (see the module docstring).

    Attributes (all read-only by convention; lists are shared with extensions' copies):

    ``nullable``, ``productive``
        frozensets of nonterminal ids;
    ``nullable_flags``
        per symbol id, 1 when nullable (a bytearray: the recognizers' inner loops index it);
    ``item_next``, ``item_lhs``, ``item_rule``, ``rule_first``
        the dotted-item tables;
    ``predict``
        per symbol id, the first items of its usable rules (empty for terminals);
    ``start_end_items``
        the items that complete a usable rule of the start symbol;
    ``terminal_ids``
        terminal name -> id.
    """

    __slots__ = (
        "base", "first_rule", "first_symbol", "n_terminals", "symbol_names", "rule_table",
        "start_id", "terminal_ids", "nullable", "productive", "nullable_flags", "item_next",
        "item_lhs", "item_rule", "rule_first", "predict", "start_end_items", "_first_masks",
        "_lookahead",
    )

    def __init__(
        self,
        symbol_names: Sequence[str],
        n_terminals: int,
        rule_table: RuleTable,
        start_id: int,
        *,
        base: GrammarAnalysis | None = None,
        productive: Collection[int] | None = None,
    ) -> None:
        """Analyse a grammar; with `base`, only the rules after the base's are new.

        `productive`, when the caller already knows it (a quotient's derived rules are
        productive by construction), spares that fixpoint; it must be exactly the set of
        productive nonterminals.
        """
        self.base = base
        self.symbol_names = symbol_names
        self.n_terminals = n_terminals
        self.rule_table = rule_table
        self.start_id = start_id
        if base is None:
            self.first_rule = self.first_symbol = 0
            self.terminal_ids = {symbol_names[i]: i for i in range(n_terminals)}
            seed_nullable: frozenset[int] = frozenset()
            seed_productive: frozenset[int] = frozenset()
            # The base's lists are copied (a flat memcpy), never changed: a base is shared by
            # every extension built on it.
            self.nullable_flags = bytearray()
            self.item_next: list[int] = []
            self.item_lhs: list[int] = []
            self.item_rule: list[int] = []
            self.rule_first: list[int] = []
            self.predict: list[tuple[int, ...]] = []
        else:
            if n_terminals != base.n_terminals:
                raise ValueError("an extension cannot add terminals to its base grammar")
            self.first_rule = len(base.rule_table)
            self.first_symbol = len(base.symbol_names)
            self.terminal_ids = base.terminal_ids
            seed_nullable, seed_productive = base.nullable, base.productive
            self.nullable_flags = bytearray(base.nullable_flags)
            self.item_next = list(base.item_next)
            self.item_lhs = list(base.item_lhs)
            self.item_rule = list(base.item_rule)
            self.rule_first = list(base.rule_first)
            self.predict = list(base.predict)
        first_rule = self.first_rule
        if start_id < n_terminals:
            raise ValueError(f"start symbol {symbol_names[start_id]!r} is a terminal")
        self.nullable = least_fixpoint(rule_table, first_rule, n_terminals, seed_nullable, False)
        self.productive = frozenset(productive) if productive is not None else least_fixpoint(
            rule_table, first_rule, n_terminals, seed_productive, True)
        self._add_items()
        self._first_masks: list[int] | None = None
        self._lookahead: list[tuple[tuple[int, int], ...]] | None = None
        self.start_end_items = tuple(
            fi + len(rule_table[self.item_rule[fi]][1]) for fi in self.predict[start_id]
        )

    def _add_items(self) -> None:
        """Item tables and prediction lists for the rules and symbols that are new here."""
        table = self.rule_table
        n_syms = len(self.symbol_names)
        first_symbol = self.first_symbol
        predict: list[list[int]] = [[] for _ in range(n_syms - first_symbol)]
        item_next, item_lhs, item_rule = self.item_next, self.item_lhs, self.item_rule
        rule_first = self.rule_first
        prod, n_t = self.productive, self.n_terminals
        for rid in range(self.first_rule, len(table)):
            lhs, rhs = table[rid]
            first = len(item_next)
            rule_first.append(first)
            item_next.extend(rhs)
            item_next.append(-1)
            span = len(rhs) + 1
            item_lhs.extend([lhs] * span)
            item_rule.extend([rid] * span)
            # `is_usable`, inlined: a quotient adds thousands of rules per request.
            if lhs in prod and all(s < n_t or s in prod for s in rhs):
                predict[lhs - first_symbol].append(first)
        if len(item_next) > MASK + 1:
            raise OverflowError(f"{len(item_next)} dotted items: more than an Earley key holds")
        self.predict.extend(tuple(p) for p in predict)
        nullable = self.nullable
        self.nullable_flags.extend(
            1 if first_symbol + k in nullable else 0 for k in range(n_syms - first_symbol))

    # -- queries -------------------------------------------------------------------------

    @property
    def n_symbols(self) -> int:
        return len(self.symbol_names)

    def is_usable(self, rid: int) -> bool:
        """Whether rule `rid` can take part in a derivation of a terminal string."""
        lhs, rhs = self.rule_table[rid]
        prod, n_t = self.productive, self.n_terminals
        return lhs in prod and all(s < n_t or s in prod for s in rhs)

    def usable_rules(self) -> list[int]:
        """Ids of the usable rules, in order."""
        return [rid for rid in range(len(self.rule_table)) if self.is_usable(rid)]

    def terminal_id(self, name: str) -> int:
        """Id of terminal `name`; KeyError naming it when the grammar has no such terminal."""
        try:
            return self.terminal_ids[name]
        except KeyError:
            raise KeyError(name) from None

    def first_masks(self) -> list[int]:
        """FIRST set of every symbol as a terminal bit mask (bit ``a``: terminal id ``a``)."""
        if self._first_masks is None:
            n_t = self.n_terminals
            flags = self.nullable_flags
            first = [1 << a for a in range(n_t)] + [0] * (self.n_symbols - n_t)
            changed = True
            while changed:
                changed = False
                for lhs, rhs in self.rule_table:
                    m = 0
                    for sym in rhs:
                        m |= first[sym]
                        if sym < n_t or not flags[sym]:
                            break
                    if m & ~first[lhs]:
                        first[lhs] |= m
                        changed = True
            self._first_masks = first
        return self._first_masks

    def lookahead(self) -> list[tuple[tuple[int, int], ...]]:
        """Per symbol, its predicted first items with a FIRST mask: ``(item, mask)``.

        ``mask`` has bit ``a`` set when the rule's right side can start with terminal ``a``;
        it is -1 (all bits) when the whole right side is nullable, since the rule may then
        be followed by anything. Computed on first use.
        """
        if self._lookahead is None:
            first = self.first_masks()
            n_t = self.n_terminals
            flags = self.nullable_flags
            table, irule = self.rule_table, self.item_rule
            out: list[tuple[tuple[int, int], ...]] = []
            for items in self.predict:
                row = []
                for fi in items:
                    m = 0
                    for sym in table[irule[fi]][1]:
                        m |= first[sym]
                        if sym < n_t or not flags[sym]:
                            break
                    else:
                        m = -1
                    row.append((fi, m))
                out.append(tuple(row))
            self._lookahead = out
        return self._lookahead
