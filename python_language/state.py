"""A state of the Python FIM language: the left context plus the middle fed so far.

`feed` lexes the new text incrementally (certain lexemes only; the uncertain tail stays
pending) and scans the certain terminals with the fast recognizer of the language's grammar.
It returns None when the terminals cannot continue, when they break the scope's rules
(`python_language.scopes`), or when the pending tail cannot begin any lexeme the recognizer
could scan next (with the layout terminals it would imply).

`is_complete` decides whether left + middle + right is a valid file. How depends on the end
the language could build (`ExactEnd`, `PrefixEnd`, `NoConstraint`); the exact case is the
argument of docs/DESIGN.md ("Why is_complete is exact"): lex ``pending + R[:i]`` for the
smallest start index ``i`` that is a true lexeme boundary, compute the real layout signature
there, scan its terminals and the marker of the branch precomputed for exactly that signature,
and ask whether the recognizer is complete. When no branch was precomputed for that signature,
CPython's parser answers instead (`python_language.fallback`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lexer.layout import Layout, LayoutError, advance_ws, leading_ws, line_start
from lexer.right_context import RightContext, Signature
from lexer.tokenizer import LexError, Tokenizer, Until
from quotient import RecognizerState, Scope
from quotient.constraint import MemoFeed

from .fallback import file_parses
from .scopes import MiddleRules


@dataclass(frozen=True)
class NoConstraint:
    """Mode "none": nothing is checked while feeding; CPython judges the whole file."""

    left: str
    right: str


@dataclass(frozen=True)
class PrefixEnd:
    """Mode "prefix": left + middle + the right window need only be a valid prefix."""

    right_window: str


@dataclass(frozen=True, eq=False)
class ExactEnd:
    """The exact end: right-context branches, each behind its layout signature's marker."""

    left_window: str  # as parsed (with a synthetic header when cut inside a block)
    right_window: str
    context: RightContext  # R's window lexed for every start index and layout guess
    marks: Mapping[tuple[int, Signature], str]  # (start index, signature) -> marker terminal
    starts: tuple[int, ...]  # start indices that have a branch, in order


End = NoConstraint | PrefixEnd | ExactEnd


@dataclass(frozen=True, eq=False)
class Shared:
    """What every state of one language shares."""

    tokenizer: Tokenizer
    rules: MiddleRules
    end: End
    # Terminals some lexeme starting with a given tail belongs to (bounded memo).
    prefix_cache: dict[str, frozenset[str]] = field(default_factory=dict, compare=False)

    def prefix_terminals(self, tail: str) -> frozenset[str]:
        got = self.prefix_cache.get(tail)
        if got is None:
            got = frozenset(self.tokenizer.table.prefix_terminals(tail))
            if len(self.prefix_cache) < 4096:
                self.prefix_cache[tail] = got
        return got


class FimState(MemoFeed):
    """A persistent state: `feed` never changes it, and equal texts fed give equal states."""

    __slots__ = ("shared", "parser", "layout", "pending", "text", "_memo", "_complete")

    def __init__(self, shared: Shared, parser: RecognizerState | None, layout: Layout,
                 pending: str, text: str):
        self.shared = shared
        self.parser = parser  # None in mode "none"
        self.layout = layout
        self.pending = pending  # the uncertain tail: not yet scanned
        self.text = text  # everything fed since the initial state
        self._memo: dict[str, FimState | None] | None = None
        self._complete: bool | None = None

    # -- feeding -----------------------------------------------------------------------------

    def _feed(self, text: str) -> FimState | None:
        shared = self.shared
        if isinstance(shared.end, NoConstraint):
            return FimState(shared, None, self.layout, "", self.text + text)
        rules = shared.rules
        if rules.scope is Scope.LINE and ("\n" in text or "\r" in text):
            return None
        pending = self.pending + text
        try:
            lexed = shared.tokenizer.lex(pending, 0, len(pending), self.layout, Until.CERTAIN)
        except LexError:
            return None
        terminals = lexed.terminals
        parser = self.parser
        assert parser is not None
        if terminals:
            if not rules.admits(self.layout, lexed.layout, terminals):
                return None
            parser = parser.scan_many(terminals)
            if parser is None:
                return None
        tail = pending[lexed.tail:]
        if tail and not self.tail_viable(parser, lexed.layout, tail):
            return None
        return FimState(shared, parser, lexed.layout, tail, self.text + text)

    def tail_viable(self, parser: RecognizerState, layout: Layout, tail: str) -> bool:
        """Whether the uncertain `tail`, at `layout` after `parser`, can still begin a lexeme
        the recognizer accepts (with the INDENT/DEDENTs its line start implies)."""
        c = tail[0]
        if c == "#":
            return "\0" not in tail  # CPython refuses a NUL, in a comment too
        if c == "\\":
            return tail == "\\"
        shared = self.shared
        if layout.bol and layout.depth == 0:
            rules = shared.rules
            try:
                change, stack = line_start(layout.stack, (layout.col, layout.alt))
            except LayoutError:
                return False
            if change > 0 and rules.indent_width and not rules.indents_by_width(
                    self.layout.stack, stack):
                return False
            pre = rules.terminals.for_change(change)
            if change < 0 and rules.holds_block and not rules.within_block(
                    len(layout.stack), pre):
                return False
            if pre:
                scanned = parser.scan_many(pre)
                if scanned is None:
                    return False
                parser = scanned
        return not shared.prefix_terminals(tail).isdisjoint(parser.allowed_terminals())

    # -- the end of the middle ---------------------------------------------------------------

    def is_complete(self) -> bool:
        """True iff left + fed text + right is a valid Python file (within the windows)."""
        if self._complete is None:
            end = self.shared.end
            if isinstance(end, ExactEnd):
                self._complete = self._exact_complete(end)
            elif isinstance(end, PrefixEnd):
                self._complete = self._prefix_complete(end)
            else:
                # No constraint was built; at the end, CPython's parser still answers exactly.
                self._complete = file_parses(end.left + self.text + end.right)
        return self._complete

    def _exact_complete(self, end: ExactEnd) -> bool:
        right = end.right_window
        parser = self.parser
        assert parser is not None
        for i in end.starts:
            boundary = self._at_boundary(self.pending + right[:i], right, i)
            if boundary is None:
                continue
            terminals, layout = boundary
            if i == len(right) and layout.joined:
                return False  # the file would end right after a line continuation
            rc = end.context
            if layout.bol and layout.depth == 0 and rc.continues_line(i):
                # The middle ends at the start of a line R continues: its INDENT/DEDENTs
                # follow from the real stack (computed here), not from a guess.
                level = (layout.col, layout.alt) if layout.frozen else \
                    advance_ws(layout.col, layout.alt, leading_ws(right, i))
                try:
                    change, stack = line_start(layout.stack, level)
                except LayoutError:
                    return False
                terminals = terminals + self.shared.rules.terminals.for_change(change)
                sig = rc.signature_after(i, stack)
            else:
                sig = rc.signature(i, layout)
            if sig is None:
                return False  # R[i:] does not even lex from this layout (e.g. bracket depth)
            mark = end.marks.get((i, sig))
            if mark is None:
                return file_parses(end.left_window + self.text + right)
            st = parser.scan_many(terminals) if terminals else parser
            if st is None:
                return False
            st = st.scan(mark)
            return st is not None and st.is_complete()
        return file_parses(end.left_window + self.text + right)

    def _at_boundary(self, head: str, right: str, i: int) -> tuple[list[str], Layout] | None:
        """Lex `head` (= pending + R[:i]) if `i` is a lexeme boundary of pending + R:
        its terminals and the layout after them, or None."""
        tok = self.shared.tokenizer
        try:
            lexed = tok.lex(head, 0, len(head), self.layout, Until.CERTAIN)
        except LexError:
            return None
        tail_start = lexed.tail
        if tail_start == len(head):
            return lexed.terminals, lexed.layout
        tail = head[tail_start:]
        nxt = right[i:i + 1]
        if tail[0] == "#":
            if nxt in ("", "\n", "\r") and "\0" not in tail:
                return lexed.terminals, lexed.layout
            return None
        if tail[0] == "\\":
            return None
        probe = head + nxt
        if nxt and tok.table.is_prefix(probe, tail_start, len(probe)):
            return None  # the lexeme runs on into R[i:]
        try:
            rest = tok.lex(head, tail_start, len(head), lexed.layout, Until.BOUNDARY)
        except LexError:
            return None
        return lexed.terminals + rest.terminals, rest.layout

    def _prefix_complete(self, end: PrefixEnd) -> bool:
        text = self.pending + end.right_window
        try:
            lexed = self.shared.tokenizer.lex(text, 0, len(text), self.layout, Until.CERTAIN)
        except LexError:
            return False
        assert self.parser is not None
        st = self.parser.scan_many(lexed.terminals)
        if st is None:
            return False
        tail = text[lexed.tail:]
        return not tail or self.tail_viable(st, lexed.layout, tail)

    def __repr__(self) -> str:
        return f"FimState(text={self.text!r}, pending={self.pending!r})"
