"""Lexemes: the grammar's terminals compiled for maximal-munch and prefix (partial) matching.

A `LexemeTable` is built from a grammar's terminal definitions (name, kind "str" | "re",
pattern, flags, priority). It answers the two questions the incremental lexer asks:

* `longest(text, pos, end)`: the maximal-munch lexeme at `pos` (terminal name and end), with
  string literals (keywords, soft keywords, operators) taking priority over a regex terminal
  that matches the same text, as in lark and CPython;
* `is_prefix(text, pos, end)`: could `text[pos:end]` still be the beginning of some lexeme?
  (`regex` partial matching.) A lexeme is only *certain* once this is false for the text after
  its start, i.e. no future character can make a longer match.

F-strings are not regular (PEP 701 nests them); the terminal named by `fstring_terminal` is
scanned by `lexer.fstrings` instead of a regex.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import regex

from lexer.fstrings import FSTRING_START, scan_fstring

_PROBES = [chr(c) for c in range(32, 127)] + ["\t", "\n", "\u00e9"]


@dataclass(frozen=True)
class TerminalSpec:
    """What the lexer needs of one grammar terminal."""

    name: str
    kind: str  # "str" (a literal) or "re"
    pattern: str
    flags: frozenset[str] = frozenset()
    priority: int = 0


def _inline_flags(pattern: str, flags: Iterable[str]) -> str:
    flags = "".join(sorted(f for f in flags if f in "imsux"))
    return f"(?{flags}:{pattern})" if flags else f"(?:{pattern})"


class LexemeTable:
    """The terminals of a grammar, compiled once for the lexer."""

    def __init__(self, specs: Iterable[TerminalSpec], fstring_terminal: str | None = "FSTRING"):
        self.literals: dict[str, str] = {}
        regexes: list[tuple[str, regex.Pattern, int]] = []
        alternatives: list[str] = []
        for spec in specs:
            if spec.kind == "str":
                self.literals.setdefault(spec.pattern, spec.name)
                alternatives.append(regex.escape(spec.pattern))
            else:
                src = _inline_flags(spec.pattern, spec.flags)
                regexes.append((spec.name, regex.compile(src), spec.priority))
                alternatives.append(src)
        self.fstring_terminal = fstring_terminal
        self.terminals = frozenset(
            [n for n, _, _ in regexes] + list(self.literals.values())
            + ([fstring_terminal] if fstring_terminal else [])
        )
        # Operators: literals that are not words; words (keywords) are found through NAME.
        self._ops = {t: n for t, n in self.literals.items() if not _is_word(t)}
        self._op_lengths = sorted({len(t) for t in self._ops}, reverse=True)
        self._prefix = regex.compile("|".join(alternatives) or "(?!)")
        # Candidate regex terminals by first character (ASCII), to avoid trying all of them.
        self._by_char: dict[str, list[tuple[str, regex.Pattern, int]]] = {}
        for code in range(128):
            ch = chr(code)
            self._by_char[ch] = [r for r in regexes if r[1].fullmatch(ch, partial=True)]
        self._non_ascii = [r for r in regexes if r[1].fullmatch("\u00e9", partial=True)]

    # -- queries -------------------------------------------------------------------------

    def longest(self, text: str, pos: int, end: int) -> tuple[str, int] | None:
        """The maximal-munch lexeme starting at `pos` within `text[:end]`: (terminal, end)."""
        ch = text[pos]
        if self.fstring_terminal and ch in "fFrR":
            m = FSTRING_START.match(text, pos, end)
            if m:
                stop = scan_fstring(text, pos, end)
                if stop is not None and stop > 0:
                    return self.fstring_terminal, stop
                return None
        best_end = pos
        best_name: str | None = None
        best_prio = -1
        for name, rx, prio in self._by_char.get(ch, self._non_ascii):
            m = rx.match(text, pos, end)
            if m is None:
                continue
            stop = m.end()
            if stop > best_end or (stop == best_end and stop > pos and prio > best_prio):
                best_end, best_name, best_prio = stop, name, prio
        for length in self._op_lengths:
            if length <= best_end - pos:
                break
            name = self._ops.get(text[pos:pos + length])
            if name is not None and pos + length <= end:
                best_end, best_name = pos + length, name
                break
        if best_name is None:
            return None
        word = self.literals.get(text[pos:best_end])
        if word is not None:
            best_name = word
        return best_name, best_end

    def is_prefix(self, text: str, pos: int, end: int) -> bool:
        """True if `text[pos:end]` is a (possibly complete) prefix of some lexeme."""
        if self.fstring_terminal and FSTRING_START.match(text, pos, end):
            return scan_fstring(text, pos, end) in (-1, end)
        if pos >= end:
            return True
        return self._prefix.fullmatch(text, pos, end, partial=True) is not None

    def is_complete_lexeme(self, text: str) -> bool:
        """Whether `text` is, as a whole, the maximal-munch lexeme it starts."""
        found = self.longest(text, 0, len(text)) if text else None
        return found is not None and found[1] == len(text)

    def can_grow(self, text: str) -> bool:
        """Whether some longer text starting with `text` is also a lexeme prefix.

        A complete match is not a final one: `if` may still become the name `iffy`, `1` the
        float `1.5`, `=` the operator `==`; `)` cannot grow. Decided by probing every
        character that may follow (ASCII, and a non-ASCII letter standing for the rest).
        """
        return any(self.is_prefix(text + ch, 0, len(text) + 1) for ch in _PROBES)

    def prefix_terminals(self, text: str) -> set[str]:
        """The terminals some lexeme of which starts with `text` (used for viability)."""
        if not text:
            return set(self.terminals)
        out: set[str] = set()
        if self.fstring_terminal and FSTRING_START.match(text):
            if scan_fstring(text, 0, len(text)) in (-1, len(text)):
                out.add(self.fstring_terminal)
        for name, rx, _ in self._by_char.get(text[0], self._non_ascii):
            if rx.fullmatch(text, partial=True):
                out.add(name)
        for lit, name in self.literals.items():
            if lit.startswith(text):
                out.add(name)
        return out


def _is_word(text: str) -> bool:
    return text.replace("_", "a").isidentifier()
